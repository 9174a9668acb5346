"""The params section of instruction tuning (notebook 07, ``azllm sft PARAMS``). See :mod:`azllm.recipes.sft`.

The adapters' shape (``model.lora``), QLoRA's quantized base (``model.quant``), the rows of new tokens
(``model.new_rows``), the weights' dtype (``model.dtype``) and the Liger kernels (``model.liger``) are the
``model`` section's, as for continued pretraining; everything else of the SFT stage is here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .data import Method, Section, SourceConfig


class SftSourceConfig(SourceConfig):
    """One instruction data source: where it is (the corpus's :class:`SourceConfig` fields: a local jsonl/parquet
    glob under the data root, else a hub dataset; ``text_field`` is not used) and how its records read."""

    format: Literal["auto", "messages", "prompt_completion", "instruction"] = "auto"
    """messages (a list of ``{role, content}`` turns) | prompt_completion (``prompt`` + ``completion``) |
    instruction (``instruction`` [+ ``input``] + ``output`` or ``response``: Alpaca style); auto: from the first
    record's fields, in that order."""
    fields: dict[str, str] = Field(default_factory=dict)
    """The data's own names for the canonical fields ``messages``, ``prompt``, ``completion``, ``instruction``,
    ``input``, ``output`` (or ``response``), ``system``, ``id``, e.g. ``{instruction: question, output: answer}``.
    A named field missing from a record is an error that lists the fields found."""
    origin: Literal["native", "translated", "unknown"] = "unknown"
    """Written by native speakers or machine-translated (shown in the data table)."""


def _sources() -> dict[str, SftSourceConfig]:
    return {
        "native": SftSourceConfig(path="data/az/sft/native_train.jsonl", origin="native"),
        "alpaca_mt": SftSourceConfig(path="data/az/sft/alpaca_az_mt.jsonl", origin="translated"),
    }


class SftVariant(Section):
    """One row of the methods table: a method, with or without packing."""

    method: Method = "lora"
    """full | lora | qlora."""
    packing: bool = False
    """Pack the conversations (``sft.packing_strategy``)."""


class SftConfig(Section):
    """Instruction tuning with TRL's ``SFTTrainer``: chat data, cleaning, decontamination, the chat template,
    training, held-out evaluation, export."""

    base: str | None = None
    """The model tuned: a folder (safetensors) or a hub id. None: the adapted base of notebook 05, the way
    and method with the best Azerbaijani bits per byte, exported as one folder."""
    sources: dict[str, SftSourceConfig] = Field(default_factory=_sources)
    """Instruction data by name (replaces the default map as a whole when given)."""
    eval_sources: dict[str, SftSourceConfig] = Field(default_factory=dict)
    """Your own test sets, by name (the same fields as ``sources``): every conversation of them is held out (loss,
    answers, chrF++), never trained on, and the training conversations are decontaminated against them. They are
    cleaned like the training data but not deduplicated against it. With them, ``holdout_size`` may be 0 (score on
    the test sets alone); a name may not also be in ``sources``."""
    holdout_source: str = "native"
    """The source the fixed held-out split is taken from (native text makes better references)."""
    holdout_size: int = 15
    """Conversations of ``holdout_source`` held out for evaluation (loss, generations, chrF++), beside every
    conversation of ``eval_sources``; 0: none drawn."""
    holdout_seed: int = 0
    """Key of the hash that picks the held-out split (keep it fixed to compare runs)."""
    verdict_size: int = Field(default=0, ge=0)
    """Conversations of ``holdout_source`` kept for the verdict alone: never trained on, and no choice reads them
    (not early stopping, not the best checkpoint, not a sweep's). Every model, the original base included, answers
    them with the same decoding, and every judgement reads them: the SFT stage's chrF++, the controls, preference
    tuning's accuracy and answers, the deploy checks. The ``holdout_size`` conversations are then the selection
    split (held-out loss, the best checkpoint, preference tuning's eval pairs). Drawn after it by the same keyed hash,
    so that the held-out split stays the one of the records made before this field (what their choices read), and
    the verdict holds conversations no earlier choice read.
    0: the held-out split is both (as in the records made before this field)."""
    verdict_sources: dict[str, SftSourceConfig] = Field(default_factory=dict)
    """Your own test sets for the verdict, by name (the same fields as ``sources``), for example native answers you
    keep apart: every judgement reads them instead of the ``verdict_size`` drawn conversations, which still stay out
    of training, so that the run trains on what the run without them trained on (its record's recipe, judged on your
    data). Never trained on, never read by a choice; a conversation that repeats one of their prompts is dropped
    before the splits are drawn. A name may not also be in ``sources`` or ``eval_sources``."""
    on_bad_record: Literal["error", "drop"] = "error"
    """A record with an unknown role, no assistant turn, or ending on a user turn: stop with an error naming it,
    or drop it and count it in the data table."""
    placeholders: list[str] = Field(
        default_factory=lambda: [
            "Yox",
            "Yoxdur",
            "Heç nə",
            "Heç biri",
            "-",
            "—",
            "N/A",
            "none",
            "null",
            "<noinput>",
            "No input",
        ]
    )
    """Values of an instruction record's ``input`` that mean "no input" (matched after normalization, ignoring case
    and end punctuation): the translation artefact ``"Yox"`` of the machine-translated Alpaca set. Only the
    ``input`` field: a reply "Yox" in a conversation is a real answer."""
    near_dup_threshold: float = 0.8
    """Prompts whose character 5-gram sets have a Jaccard similarity at or above this are near-duplicates (the
    later one is dropped); 1.0: exact duplicates only (always removed)."""
    max_length: int = 512
    """Tokens of one templated conversation (and of a packed row)."""
    length_policy: Literal["drop", "truncate", "error"] = "drop"
    """A conversation longer than ``max_length``: dropped (counted), truncated at ``max_length`` (counted; its
    answer loses its end and its end-of-turn token), or an error naming it."""
    decontaminate: bool = True
    """Drop training conversations that overlap the held-out split or the evaluation texts (counted)."""
    decontaminate_sets: list[str] | None = None
    """Names of ``data.eval`` sets checked against (None: all of them)."""
    decontaminate_extra: dict[str, SourceConfig] = Field(
        default_factory=lambda: {"tumlu": SourceConfig(path="data/az/eval/tumlu/dev/*.jsonl", text_field="question")}
    )
    """More evaluation texts checked against, by name (e.g. the questions of an evaluation task); a source that
    is not found is reported and skipped."""
    decontaminate_ngram: int = 8
    """A training conversation sharing a word n-gram of this length with an evaluation text is contaminated."""
    template: str = "auto"
    """auto: the base's own chat template when it has one, else azllm's | azllm: azllm's template
    (:mod:`azllm.sft.template`) | a path to a Jinja file (with ``{% generation %}`` markers for assistant-only
    loss)."""
    assistant_only_loss: bool = True
    """Loss on the assistant turns (and their end-of-turn token) only; needs generation markers in the template."""
    completion_only_loss: bool | None = None
    """TRL's completion-only loss for prompt/completion data (None: TRL's default, on for such data). azllm turns
    every format into messages, so ``assistant_only_loss`` is what applies."""
    method: Method = "lora"
    """The main run's method."""
    packing: bool = False
    """Pack conversations into ``max_length`` rows in the main run."""
    packing_strategy: Literal["bfd", "wrapped"] = "bfd"
    """bfd: best-fit decreasing, padding-free (position ids restart per conversation; SDPA builds a block-diagonal
    mask from them, so packed conversations do not see each other: tested) | wrapped: cut at ``max_length``
    across conversations (they attend across boundaries: measured, not recommended)."""
    max_steps: int = 200
    """Optimizer steps of the main run."""
    batch_size: int = 4
    """Conversations (or packed rows) per device and step."""
    grad_accum: int = 1
    """Gradient accumulation steps."""
    lr: float = 2e-3
    """Peak learning rate (the default suits the small stand-in base of this machine; a pretrained 1B base wants
    1e-4 to 3e-4 with LoRA, as the sft_* params files set)."""
    min_lr_ratio: float = 0.1
    """Cosine decays to lr x min_lr_ratio."""
    warmup_steps: int = 10
    """Linear warm-up steps."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    betas: list[float] = Field(default_factory=lambda: [0.9, 0.999])
    """AdamW betas (the Trainer's defaults, which SFT used before it had a key)."""
    grad_clip: float = 1.0
    """Gradient norm clipping."""
    optimizer: Literal["adamw", "adamw_8bit", "paged_adamw_8bit"] = "adamw"
    """torch AdamW or bitsandbytes' (paged) 8-bit AdamW."""
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    """auto: bf16 on GPUs that have it, fp16 on older GPUs; on a CPU with AVX512-BF16 or AMX, bf16 autocast for a
    model of 20M parameters or more with 1024 tokens or more per micro-batch (measured faster: :mod:`azllm.loop`),
    else fp32."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (TRL's default is on; azllm's is off)."""
    eval_steps: int = 50
    """Held-out loss every this many steps (a checkpoint is saved at each evaluation)."""
    eval_batch_size: int = 8
    """Held-out conversations per evaluation batch."""
    keep_best: bool = True
    """Load the checkpoint with the lowest held-out loss at the end (small instruction sets overfit fast)."""
    early_stopping_patience: int | None = None
    """Stop after this many evaluations without a lower held-out loss (None: never)."""
    save_total_limit: int = 2
    """Checkpoints kept (the best one is always kept with ``keep_best``)."""
    logging_steps: int = 10
    """Log the training loss every this many steps."""
    untimed_steps: int = 3
    """Steps left out of tokens/s."""
    resume: bool = True
    """Resume from the last complete checkpoint of the same run."""
    report_to: list[str] = Field(default_factory=list)
    """Experiment trackers of the Trainer ([] for none)."""
    max_new_tokens: int = 96
    """Tokens generated per held-out instruction (greedy)."""
    repetition_penalty: float = Field(default=1.0, gt=0)
    """The repetition control of every held-out answer and built pair, the same for every model: the CTRL penalty
    on the answer's own tokens (:mod:`azllm.sft.generate`; 1.0: none, 1.2 in the SmolLM2 study)."""
    generate_batch_size: int = Field(default=8, ge=1)
    """Held-out prompts generated at once (left-padded, sorted by length; the same greedy answers as one at a time)."""
    controls: bool = False
    """Notebook 07 also answers with the original base (``adapt.base``) and trains the same SFT recipe on it, so
    that the page shows which stage helps (:mod:`azllm.recipes.controls`; one more SFT run)."""
    samples_shown: int = 3
    """Held-out answers shown side by side with their references."""
    compare: list[SftVariant] = Field(
        default_factory=lambda: [
            SftVariant(method="lora", packing=True),
            SftVariant(method="full", packing=False),
            SftVariant(method="full", packing=True),
            SftVariant(method="qlora", packing=False),
            SftVariant(method="qlora", packing=True),
        ]
    )
    """Variants trained for the methods table (each in its own process), from the same base and data; with the main
    run (``method``, ``packing``) the six of full / LoRA / QLoRA x packing off / on by default."""
    compare_steps: int = 20
    """Steps of each variant (a packed step holds more tokens: compare tokens/s, not held-out loss at equal steps,
    across packing on and off). QLoRA on a CPU is the slowest (bitsandbytes' dequantization: ~150 tokens/s on the
    default stand-in, ~4 min for its packed variant at 30 steps)."""
    export: bool = True
    """Write the merged standalone folder (safetensors, tokenizer, chat template)."""
    plan_preset: str | None = "1b"
    """Model shape (:data:`azllm.model.PRESETS`) the launch's checkpoint-storage cost assumes for a hub base."""
    plan_vocab_size: int = 128256
    """Vocabulary of that shape (Llama-3's)."""
