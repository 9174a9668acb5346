"""The typed configuration of a run: one pydantic model per params section, the only place defaults live.

A params YAML (``params/*.yaml``) holds only what differs from these defaults, which describe the default run of
this repository (the tiny Llama on 2 CPU cores, an 8k BPE tokenizer, the shared Azerbaijani corpus). Every field
is documented below, in the docstring under it. :func:`load_params` reads a file, lays it over the defaults and
rejects an unknown key or a wrong type with the key's dotted name and the keys allowed there.

One vocabulary across sections:

- ``dtype`` is always ``fp32`` | ``bf16`` | ``fp16``;
- ``warmup_steps`` is the learning-rate warm-up of training; steps left out of a timing are ``untimed_steps``;
- ``rounds`` are fresh processes per measured variant, run round-robin; ``windows`` are timed windows inside one
  process.

Maps whose keys the user chooses (eval sets, baselines, fit-planner models) replace the default map as a whole
when given. Secrets never go into params: a hub token comes from ``HF_TOKEN`` in the environment, and keys or
values that look like secrets are refused.

Only the run layer (:mod:`azllm.run`, the notebooks, the benchmarks' entry points) reads a config; library
functions take plain named arguments.

>>> cfg = load_params(None, overrides={"run_name": "demo", "seed": 7})
>>> cfg.run_name, cfg.seed, cfg.tokenizer.vocab_size, cfg.train.method
('demo', 7, 8000, 'full')
>>> load_params(None, overrides={"train": {"lr_max": 1}})
Traceback (most recent call last):
...
azllm.config.ParamsError: unknown params key train.lr_max; allowed keys in train: batch_size, betas, ...
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .utils import json_hash

__all__ = ["Config", "ParamsError", "load_params", "deep_update", "SourceConfig", "DataConfig",
           "TokenizerConfig", "SweepConfig", "BaselineConfig", "ReportConfig", "TokensConfig", "EncoderBenchConfig",
           "ModelConfig", "LigerConfig", "LoraConfig", "QuantConfig", "TrainConfig", "GenerateConfig",
           "BenchmarkConfig", "OomProbeConfig", "FitConfig", "AdaptConfig", "Dtype"]

Dtype = Literal["fp32", "bf16", "fp16"]


class ParamsError(ValueError):
    """A params file is malformed: an unknown key, a wrong type, a secret."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True,
                              validate_default=False)


# ------------------------------------------------------------------------------------------------------ data

class SourceConfig(_Section):
    """One data source: a local path (used when it matches files), else a hub dataset streamed."""

    path: str | None = None
    """Glob of local files, relative to the data root unless absolute (.txt: one document per line;
    .jsonl/.parquet: the ``text_field`` of each record)."""
    hub: str | None = None
    """Hugging Face Hub dataset id (or a local dataset folder), streamed when ``path`` matches nothing."""
    config: str | None = None
    """Hub dataset config name, e.g. ``20231101.az``."""
    split: str = "train"
    """Hub dataset split."""
    text_field: str = "text"
    """Field or column holding the text (.jsonl, .parquet, hub)."""
    max_bytes: int | None = None
    """Stop after this many UTF-8 bytes of text (whole source)."""
    max_bytes_per_file: int | None = None
    """Local files only: cap each file at this many bytes (rebalances genres)."""
    max_lines: int | None = None
    """Stop after this many documents."""


def _src(**kw: Any) -> Any:
    return Field(default_factory=lambda: SourceConfig(**kw))


class ParallelPair(_Section):
    """Two line-parallel sides of one set: Azerbaijani and English."""

    az: SourceConfig = Field(default_factory=SourceConfig)
    """The Azerbaijani side."""
    en: SourceConfig = Field(default_factory=SourceConfig)
    """The English side, line by line the translation of ``az``."""


_FLORES_AZ = dict(path="data/az/dev/flores200.dev.azj_Latn.txt", hub="openlanguagedata/flores_plus",
                  config="azj_Latn", split="dev")
_FLORES_EN = dict(path="data/az/dev/flores200.dev.eng_Latn.txt", hub="openlanguagedata/flores_plus",
                  config="eng_Latn", split="dev")


class DataConfig(_Section):
    """Where the text comes from."""

    root: str | None = None
    """Data root for relative paths; None: ``$AZLLM_DATA_ROOT`` (the Makefile sets it to ../shared)."""
    train: SourceConfig = _src(path="data/az/train/*.txt", hub="wikimedia/wikipedia", config="20231101.az",
                               max_bytes=25_000_000)
    """The training corpus (tokenizers, token files, models)."""
    eval: dict[str, SourceConfig] = Field(default_factory=lambda: {
        "flores": SourceConfig(**_FLORES_AZ), "xwmt": SourceConfig(path="data/az/dev/xwmt.test.az.txt")})
    """Held-out sets by name: tokenizer metrics and the models' dev evaluations. The first one ranks tokenizers."""
    parallel: dict[str, ParallelPair] = Field(default_factory=lambda: {
        "flores": ParallelPair(az=SourceConfig(**_FLORES_AZ), en=SourceConfig(**_FLORES_EN))})
    """Line-parallel az/en sets by name, for the token parity az/en."""


# ------------------------------------------------------------------------------------------------ tokenizer

class SweepConfig(_Section):
    """The tokenizer study: every combination below is trained and measured."""

    vocab_sizes: list[int] = Field(default_factory=lambda: [8000, 16000, 32000, 64000])
    """Vocabulary sizes of the sweep."""
    model_types: list[Literal["unigram", "bpe"]] = Field(default_factory=lambda: ["unigram", "bpe"])
    """SentencePiece model types of the sweep."""
    affix_presplit: list[bool] = Field(default_factory=lambda: [False, True])
    """With and/or without the affix-aware pre-split (azllm.morph)."""
    select_vocab_size: int | None = 32000
    """The report's "best" tokenizer is chosen at this vocabulary size (None: ``tokenizer.vocab_size``)."""


class TokenizerConfig(_Section):
    """The run's main tokenizer (token files, model), and the study around it."""

    model_type: Literal["unigram", "bpe"] = "bpe"
    """SentencePiece model type."""
    vocab_size: int = 8000
    """Pieces, specials and byte pieces included. 8k fits the tiny CPU model; use 32000 for 125m/1b."""
    character_coverage: float = 0.9999
    """Share of characters covered by pieces; the rest go through byte fallback."""
    byte_fallback: bool = True
    """Unknown characters become UTF-8 byte pieces, so nothing is lost to <unk>."""
    split_digits: bool = False
    """One digit per piece."""
    max_piece_length: int = 16
    """Longest piece in characters."""
    affix_presplit: bool = False
    """No piece crosses a suffix boundary predicted by azllm.morph (training-time only)."""
    split_by_whitespace: bool = True
    """False allows multi-word pieces."""
    input_sentence_size: int = 0
    """Sentences SentencePiece samples for training (0: all)."""
    num_threads: int = 2
    """SentencePiece training threads."""
    max_bytes_per_file: int | None = 4_000_000
    """Cap each training file at this many bytes when training tokenizers (the legal codes are 60% of the
    corpus; the cap rebalances genres: BPE-32k FLORES fertility 1.578 -> 1.553). None: all."""
    sweep: SweepConfig = Field(default_factory=SweepConfig)
    """The vocabulary-size / model-type / pre-split study of the tokenizer report."""


class BaselineConfig(_Section):
    """A baseline tokenizer: a local file or folder, else a hub id; or a tiktoken encoding."""

    path: str | None = None
    """Folder or file relative to the data root; for ``tiktoken``, tiktoken's cache folder."""
    hub: str | None = None
    """Hub id used when ``path`` does not exist."""
    tiktoken: str | None = None
    """A tiktoken encoding name, e.g. ``o200k_base``."""


def _baselines() -> dict[str, BaselineConfig]:
    b = BaselineConfig
    return {"gpt2": b(path="tokenizers/gpt2", hub="openai-community/gpt2"),
            "llama2": b(path="tokenizers/llama2/tokenizer.model", hub="meta-llama/Llama-2-7b-hf"),
            "mistral": b(path="tokenizers/mistral-7b-v0.1/tokenizer.model", hub="mistralai/Mistral-7B-v0.1"),
            "llama3": b(path="tokenizers/llama3.1", hub="meta-llama/Llama-3.2-1B"),
            "qwen3": b(path="tokenizers/qwen3", hub="Qwen/Qwen3-0.6B"),
            "gemma": b(path="tokenizers/gemma", hub="google/gemma-2-2b"),
            "xlm-r": b(path="tokenizers/xlm-roberta/tokenizer.json", hub="FacebookAI/xlm-roberta-base"),
            "cl100k": b(tiktoken="cl100k_base", path="tokenizers/tiktoken_cache"),
            "o200k": b(tiktoken="o200k_base", path="tokenizers/tiktoken_cache"),
            "aztc-32k": b(path="tokenizers/az-localdoc-aztc", hub="LocalDoc/az-tokenizer")}


class ReportConfig(_Section):
    """What the HTML pages show."""

    show_code: bool = False
    """Show code cells in the HTML pages."""
    long_words: list[str] = Field(default_factory=lambda: [
        "evlərimizdən", "Azərbaycanlılaşdıra bilmədiklərimizdənsinizmi", "universitetlərimizdə",
        "müəllimlərimizin", "qanunvericiliyində", "gözləmədiyimiz"])
    """Words whose segmentation by every tokenizer is shown."""


# --------------------------------------------------------------------------------------------------- tokens

class EncoderBenchConfig(_Section):
    """The token-file encoder benchmark (notebook 02, azllm.bench.encoder)."""

    quick: bool = False
    """Small slice (50 KB per file unless ``max_bytes_per_file``), one round: for tests and the tiny report."""
    max_bytes_per_file: int | None = None
    """Cap each corpus file (None: data.train as it is)."""
    scale: int = 10
    """The large corpus is the corpus repeated ``scale`` times, streamed."""
    rounds: int = 3
    """Fresh processes per variant, round-robin; the table shows medians."""
    batch_size: int = 8
    """Batch of the get_batch timing and of the training step it is compared with."""
    block_size: int = 256
    """Window length of the get_batch timing."""


class TokensConfig(_Section):
    """The token files (notebook 02)."""

    tokenizer: str | None = None
    """None: the run's main tokenizer; or any spec of azllm.tokenizer.load_tokenizer."""
    dir: str | None = None
    """Where train.bin/val.bin go (None: artifacts/<run_name>/tokens)."""
    val_fraction: float = 0.01
    """Share of documents (by a keyed hash of their text) in val.bin."""
    split_seed: int = 0
    """Key of that hash: keep it fixed to compare runs on the same split."""
    num_workers: int | None = None
    """Encoding threads (None: all cores)."""
    chunk_docs: int = 1024
    """Documents per chunk (memory stays flat at ~2 x num_workers chunks)."""
    benchmark: EncoderBenchConfig = Field(default_factory=EncoderBenchConfig)
    """The encoder benchmark."""


# ---------------------------------------------------------------------------------------------------- model

class LigerConfig(_Section):
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


class LoraConfig(_Section):
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


class QuantConfig(_Section):
    """The frozen base of QLoRA (bitsandbytes)."""

    bits: Literal[4, 8] = 4
    """4-bit (NF4/FP4) or 8-bit."""
    quant_type: Literal["nf4", "fp4"] = "nf4"
    """4-bit data type."""
    double_quant: bool = True
    """Quantize the block scales too."""
    compute_dtype: Dtype = "bf16"
    """Dtype of the dequantized matmuls."""


class ModelConfig(_Section):
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

class GenerateConfig(_Section):
    """Sample generations of the trained model."""

    prompts: list[str] = Field(default_factory=lambda: ["Azərbaycan", "Bakı şəhəri", "Bu gün hava",
                                                        "Təhsil sistemində"])
    """Prompts."""
    max_new_tokens: int = 40
    """Tokens generated per prompt."""
    temperature: float = 0.8
    """Sampling temperature."""
    top_k: int = 50
    """Sampling top-k."""


class TrainConfig(_Section):
    """Training with the Hugging Face Trainer on the token files (notebook 03)."""

    method: Literal["full", "lora", "qlora"] = "full"
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
    """auto: bf16 on GPUs that have it, else fp16 on GPU, fp32 on CPU."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass."""
    eval_steps: int = 100
    """Evaluate every this many steps."""
    eval_max_tokens: int | None = 16384
    """Tokens per eval set and evaluation (None: the whole set)."""
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
    rows_only_steps: int = 0
    """Two-stage adapter schedule: new token rows alone for this many steps, then LoRA's matrices join (LoRA and
    QLoRA with a changed vocabulary)."""
    compare: list[Literal["full", "lora", "qlora"]] = Field(default_factory=lambda: ["full", "lora", "qlora"])
    """Methods trained after the main run, from its model, for the comparison table."""
    compare_steps: int = 25
    """Steps of each comparison run."""
    compare_lr: float = 1e-3
    """Learning rate of the comparison runs."""
    generate: GenerateConfig = Field(default_factory=GenerateConfig)
    """Sample generations."""


# ------------------------------------------------------------------------------------------------ benchmark

class OomProbeConfig(_Section):
    """One variant run under a memory cap at growing batches until it runs out of memory."""

    variant: str | None = "baseline"
    """The variant probed (None: no probe)."""
    cap_mb: float = 400
    """Memory above the baseline allowed."""
    batches: list[int] = Field(default_factory=lambda: [8, 16, 32])
    """Batch sizes tried in order."""


class FitConfig(_Section):
    """The fit planner: largest batch x sequence per memory budget, from the memory model."""

    presets: list[str] = Field(default_factory=lambda: ["1b"])
    """Model presets planned."""
    configs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """User models by name: {preset, vocab_size, LlamaConfig fields...}."""
    vocab_size: int | None = 32000
    """Vocabulary of the planned models (None: tokenizer.vocab_size)."""
    dtype: Dtype = "bf16"
    """Training dtype planned."""
    variants: list[str] = Field(default_factory=lambda: [
        "baseline", "ckpt", "liger", "liger+ckpt", "lora", "lora+ckpt", "qlora", "qlora+ckpt", "adamw8+ckpt"])
    """Variants planned."""
    budgets_gb: list[float] = Field(default_factory=lambda: [24, 40, 80, 141])
    """Memory budgets (GB = 10**9 bytes)."""
    seq_lens: list[int] = Field(default_factory=lambda: [512, 1024, 2048, 4096, 8192])
    """Sequence lengths planned."""
    reserve_gb: float = 1.0
    """Kept free: CUDA context, cuBLAS workspace, fragmentation (not in the model)."""


class BenchmarkConfig(_Section):
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
    variants: list[str] = Field(default_factory=lambda: [
        "baseline", "ckpt", "bf16", "adamw8", "lora", "lora+ckpt", "qlora", "liger", "liger_rope",
        "liger_rms_norm", "liger_swiglu", "liger_flce"])
    """Variant names: tokens joined by "+" (azllm.memory.parse_variant)."""
    oom_probe: OomProbeConfig = Field(default_factory=OomProbeConfig)
    """The out-of-memory probe."""
    price_per_hour: float = 0.10
    """Price of the measured machine per hour (currency of your choice)."""
    price_label: str = "2-vCPU cloud VM (example price; set yours)"
    """What that price is for."""
    fit: FitConfig = Field(default_factory=FitConfig)
    """The fit planner."""


# ----------------------------------------------------------------------------------------------------- adapt

class AdaptConfig(_Section):
    """The adaptation study (notebook 05): teach a pretrained base Azerbaijani three ways, measure what English
    loses."""

    base: str | None = None
    """A pretrained base (folder or hub id, e.g. meta-llama/Llama-3.2-1B). None: a small English Llama is
    pretrained in the notebook (model.preset + base_model) on ``english`` with an English BPE of ``base_vocab_size``."""
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
    english: SourceConfig = _src(path="data/en/train.txt", max_bytes=3_000_000)
    """English text the study base learns from."""
    english_eval: SourceConfig = _src(path="data/en/valid.txt", max_bytes=400_000)
    """Held-out English: bits per byte before and after adaptation."""
    az_train_bytes: int = 4_000_000
    """Bytes of data.train the adaptation runs read (every way reads the same documents)."""
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


# ------------------------------------------------------------------------------------------------------- run

class Config(_Section):
    """Every parameter of a run."""

    run_name: str = "default"
    """Name of the run: reports/<run_name>/, artifacts/<run_name>/."""
    seed: int = 1234
    """Seed of tokenizers, models, data order and sampling."""
    notebooks: list[str] = Field(default_factory=lambda: ["01_tokenizers", "02_tokens", "03_train",
                                                          "04_benchmark", "05_adapt"])
    """Notebooks executed, in order, from notebooks/."""
    data: DataConfig = Field(default_factory=DataConfig)
    """Data sources."""
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    """The main tokenizer and the tokenizer study."""
    baselines: dict[str, BaselineConfig] = Field(default_factory=_baselines)
    """Baseline tokenizers by name."""
    report: ReportConfig = Field(default_factory=ReportConfig)
    """Report options."""
    tokens: TokensConfig = Field(default_factory=TokensConfig)
    """Token files."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The model."""
    train: TrainConfig = Field(default_factory=TrainConfig)
    """Training."""
    benchmark: BenchmarkConfig = Field(default_factory=BenchmarkConfig)
    """The memory and throughput benchmark."""
    adapt: AdaptConfig = Field(default_factory=AdaptConfig)
    """The adaptation study."""

    def to_dict(self) -> dict:
        """Plain JSON-able nested dicts (what reports record)."""
        return self.model_dump(mode="json")

    def hash(self) -> str:
        """:func:`json_hash` of :meth:`to_dict`: equal params, equal hash."""
        return json_hash(self.to_dict())


# ------------------------------------------------------------------------------------------------- loading

_SECRET_KEYS = {"token", "hf_token", "hub_token", "use_auth_token", "auth_token", "api_key", "apikey", "password",
                "secret", "access_token", "wandb_api_key"}
_SECRET_VALUE = re.compile(r"^(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,})$")


def _check_secrets(obj: Any, where: str = "") -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if str(k).lower() in _SECRET_KEYS or (isinstance(v, str) and _SECRET_VALUE.match(v)):
                raise ParamsError(
                    f"{where + '.' if where else ''}{k}: looks like a secret. Never put tokens or passwords in "
                    "params (they end up in reports); set HF_TOKEN in the environment instead.")
            _check_secrets(v, f"{where}.{k}" if where else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_secrets(v, f"{where}[{i}]")


def _section_at(loc: tuple) -> type[BaseModel] | None:
    """The config class that holds the last key of ``loc`` (keys of user-named maps are stepped over)."""
    cls: Any = Config
    parts = list(loc[:-1])
    while parts:
        field = cls.model_fields.get(str(parts.pop(0))) if isinstance(cls, type) else None
        if field is None:
            return None
        cls = field.annotation
        if getattr(cls, "__origin__", None) is dict:  # dict[str, X]: the next part is the user's name
            cls = cls.__args__[1]
            if parts:
                parts.pop(0)
    return cls if isinstance(cls, type) and issubclass(cls, BaseModel) else None


def _explain(e: ValidationError) -> str:
    msgs = []
    for err in e.errors():
        loc = tuple(err["loc"])
        where = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            sec = _section_at(loc)
            parent = ".".join(str(p) for p in loc[:-1])
            allowed = ", ".join(sorted(sec.model_fields)) if sec else "?"
            msgs.append(f"unknown params key {where}; allowed keys{' in ' + parent if parent else ''}: {allowed}")
        else:
            msgs.append(f"{where}: {err['msg']}, got {type(err.get('input')).__name__}: {err.get('input')!r}")
    return "; ".join(msgs)


def load_params(path: str | os.PathLike | None, overrides: dict | None = None) -> Config:
    """Read a params YAML, lay it over the defaults and return the validated :class:`Config`.

    ``overrides`` (a dict of the same shape) is laid over the file, for tests and notebooks.
    """
    given: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ParamsError(f"params file not found: {path}")
        try:
            given = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise ParamsError(f"{path}: not valid YAML: {e}") from e
        if not isinstance(given, dict):
            raise ParamsError(f"{path}: the top level must be a mapping")
    if overrides:
        given = deep_update(copy.deepcopy(given), overrides)
    _check_secrets(given)
    try:
        return Config.model_validate(given)
    except ValidationError as e:
        raise ParamsError(_explain(e)) from None


def deep_update(base: dict, upd: dict) -> dict:
    """Lay ``upd`` over ``base`` in place, recursing into dicts present in both; returns ``base``.

    >>> deep_update({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}})
    {'a': {'b': 1, 'c': 3}}
    """
    for k, v in upd.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            deep_update(base[k], v)
        else:
            base[k] = v
    return base
