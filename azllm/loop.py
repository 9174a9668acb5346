"""What every training loop of azllm shares: the loop's arguments (:class:`LoopSpec`), the precision rule
(:func:`precision_flags`) and the one builder of the Trainer's arguments (:func:`training_arguments`).

Pretraining and adaptation (:class:`azllm.train.TrainSpec` -> ``transformers.TrainingArguments``), SFT
(:class:`azllm.sft.train.SftSpec` -> ``trl.SFTConfig``, which *is* a ``TrainingArguments``) and distillation
(:class:`azllm.distill.DistillSpec`) extend :class:`LoopSpec` and get their arguments from :func:`training_arguments`,
so the schedule, clipping, betas, precision, evaluation, saving, seeds, logging and the CPU/DDP settings are
written once. Each caller adds only what is its own (named in its call), and the differences are:

- **The optimizer**: ``optim`` and ``adam_beta1/2`` are set for every loop, so TRL builds AdamW with the run's
  betas; pretraining and distillation replace the Trainer's ``create_optimizer`` with
  :func:`azllm.lora.make_optimizer` (decay on matrices only, and built when FSDP / DeepSpeed ask for it).
- **Saving**: pretraining saves every ``save_steps``; SFT saves at each evaluation (it keeps the best one).
- **Precision** (``auto``): bf16 autocast on GPUs that support it, fp16 (with loss scaling) on older GPUs; on a CPU
  with bf16 instructions (AVX512-BF16 or AMX, :func:`cpu_has_bf16`) bf16 autocast for a model of at least
  :data:`CPU_BF16_MIN_PARAMS` parameters whose micro-batch holds at least :data:`CPU_BF16_MIN_TOKENS` tokens (batch
  x block, or batch x ``max_length`` for SFT), else fp32. Autocast casts every weight again at each forward, which a
  small micro-batch does not pay back. Measured on 2 idle cores of an AMX CPU, SmolLM2-135M, LoRA r=16 all-linear:
  a bare PyTorch + PEFT loop at 4 x 256 tokens takes 3.6-3.7 s per step in fp32 against 1.90-1.95 s in bf16 (1.9x;
  first-step loss 13.4264 against 13.4289, 0.02% apart; the stated tolerance is 1%), while azllm's SFT at 1 x 384
  (``params/sft_smollm2.yaml``, 12 steps, two rounds) reaches 274-284 real tokens/s in fp32 against 255-258 in
  bf16, with a peak RSS of 2.6-2.8 GB against 4.2-4.35 GB. (On an AVX512-BF16 EPYC without AMX, the 4 x 256 loop
  took 6.7 / 7.7 s per step in fp32 against 5.0 / 5.7 s in bf16.) The stand-ins below 20M parameters stay fp32.
  ``bf16``/``fp16``/``fp32`` force it.

The specs carry no defaults: every field is a params key, filled by :func:`azllm.recipes.specs.build_spec`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch

__all__ = [
    "LoopSpec",
    "training_arguments",
    "precision_flags",
    "batch_tokens",
    "cpu_has_bf16",
    "CPU_BF16_MIN_PARAMS",
    "CPU_BF16_MIN_TOKENS",
    "OPTIM_NAMES",
]

OPTIM_NAMES = {"adamw": "adamw_torch", "adamw_8bit": "adamw_bnb_8bit", "paged_adamw_8bit": "paged_adamw_8bit"}
"""azllm's optimizer names -> the Trainer's ``optim``."""

CPU_BF16_MIN_PARAMS = 20_000_000
"""``precision: auto`` on a CPU picks bf16 autocast from this many parameters on (module docstring)."""

CPU_BF16_MIN_TOKENS = 1024
"""... and from this many tokens per micro-batch on (module docstring)."""


@dataclass(frozen=True)
class LoopSpec:
    """The arguments every training loop shares, in plain values named as the params keys. Fields whose metadata
    says ``keyed: False`` do not change what a run computes (how it is tracked, resumed or shown), so
    :meth:`keyed` leaves them out; every other field, including one added later, is part of a run's key."""

    max_steps: int
    batch_size: int
    grad_accum: int
    eval_batch_size: int
    lr: float
    min_lr_ratio: float
    warmup_steps: int
    weight_decay: float
    betas: tuple
    grad_clip: float
    optimizer: str
    precision: str
    gradient_checkpointing: bool
    eval_steps: int
    save_total_limit: int
    logging_steps: int
    untimed_steps: int
    seed: int
    resume: bool = field(metadata={"keyed": False})
    report_to: tuple = field(metadata={"keyed": False})

    def keyed(self) -> dict:
        """The fields that shape the run (see the class docstring)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.metadata.get("keyed", True)}


def cpu_has_bf16() -> bool:
    """Whether this CPU has bf16 matrix instructions (AVX512-BF16 or AMX-BF16), from ``/proc/cpuinfo`` (Linux;
    False elsewhere). ``AZLLM_CPU_BF16=0`` / ``1`` overrides the reading."""
    forced = os.environ.get("AZLLM_CPU_BF16")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def precision_flags(precision: str, n_params: int | None = None, batch_tokens: int | None = None) -> dict:
    """``{"bf16": bool, "fp16": bool}`` for the Trainer (see the module docstring); ``n_params``: the model's
    parameter count (``auto`` on a CPU: fp32 when it is not given); ``batch_tokens``: tokens per micro-batch
    (``auto`` on a CPU: fp32 below :data:`CPU_BF16_MIN_TOKENS`; not given: not a reason for fp32).

    >>> precision_flags("fp32")
    {'bf16': False, 'fp16': False}
    """
    cuda = torch.cuda.is_available()
    if precision == "auto":
        if cuda:
            return {"bf16": torch.cuda.is_bf16_supported(), "fp16": not torch.cuda.is_bf16_supported()}
        big = n_params is not None and n_params >= CPU_BF16_MIN_PARAMS
        wide = batch_tokens is None or batch_tokens >= CPU_BF16_MIN_TOKENS
        return {"bf16": big and wide and cpu_has_bf16(), "fp16": False}
    if precision == "fp32":
        return {"bf16": False, "fp16": False}
    if precision == "bf16":
        return {"bf16": True, "fp16": False}
    if precision == "fp16":
        if not cuda:
            raise ValueError(
                "train.precision fp16 needs a CUDA GPU (fp16 autocast with loss scaling); use bf16 or fp32 on CPU"
            )
        return {"bf16": False, "fp16": True}
    raise ValueError(f"train.precision must be auto, fp32, bf16 or fp16, got {precision!r}")


def batch_tokens(spec) -> int | None:
    """Tokens of one micro-batch of a loop: batch x ``block_size`` (token windows) or batch x ``max_length`` (SFT,
    an upper bound: conversations are shorter unless packed).

    >>> from types import SimpleNamespace as NS
    >>> batch_tokens(NS(batch_size=4, block_size=256)), batch_tokens(NS(batch_size=1, max_length=384))
    (1024, 384)
    """
    length = getattr(spec, "block_size", None) or getattr(spec, "max_length", None)
    return int(spec.batch_size * length) if length else None


def training_arguments(
    cls,
    output_dir: str | os.PathLike,
    spec: LoopSpec,
    *,
    world: int = 1,
    n_params: int | None = None,
    save_steps: int | None = None,
    eval_on_start: bool = False,
    **own,
):
    """The Trainer's arguments of ``spec``, as ``cls`` (``transformers.TrainingArguments``, ``trl.SFTConfig`` or
    another subclass): cosine schedule with warm-up to ``lr * min_lr_ratio``, AdamW's betas, clipping, step-wise
    evaluation and saving (every ``save_steps``, by default at each evaluation), the seed for the data sampler too,
    no bars or log printing (azllm's progress callback shows progress), gloo for CPU DDP (no search for unused
    parameters), and on CUDA a non-blocking copy of each batch from pinned memory (a blocking one would sync every
    step). ``own``: the caller's own arguments (module docstring), laid over these.

    >>> from transformers import TrainingArguments
    >>> from azllm import recipes
    >>> from azllm.recipes.train import train_spec
    >>> args = training_arguments(TrainingArguments, "/tmp/x", train_spec(recipes.load(None)))
    >>> args.lr_scheduler_type.value, args.adam_beta2, args.max_grad_norm
    ('cosine_with_min_lr', 0.95, 1.0)
    """
    cuda = torch.cuda.is_available()
    s = spec
    args = dict(
        output_dir=str(Path(output_dir)),
        max_steps=s.max_steps,
        per_device_train_batch_size=s.batch_size,
        per_device_eval_batch_size=s.eval_batch_size,
        gradient_accumulation_steps=s.grad_accum,
        learning_rate=s.lr,
        lr_scheduler_type="cosine_with_min_lr",
        lr_scheduler_kwargs={"min_lr_rate": float(s.min_lr_ratio)},
        warmup_steps=s.warmup_steps,
        weight_decay=s.weight_decay,
        optim=OPTIM_NAMES[s.optimizer],
        adam_beta1=float(s.betas[0]),
        adam_beta2=float(s.betas[1]),
        max_grad_norm=s.grad_clip,
        logging_steps=s.logging_steps,
        eval_strategy="steps",
        eval_steps=s.eval_steps,
        save_strategy="steps",
        save_steps=save_steps or s.eval_steps,
        save_total_limit=s.save_total_limit,
        eval_on_start=eval_on_start,
        activation_checkpointing=s.gradient_checkpointing,
        activation_checkpointing_kwargs={"use_reentrant": False},
        report_to=list(s.report_to),
        seed=s.seed,
        data_seed=s.seed,
        dataloader_num_workers=0,
        logging_nan_inf_filter=False,
        disable_tqdm=True,
        use_cpu=not cuda,
        ddp_backend="gloo" if world > 1 and not cuda else None,
        ddp_find_unused_parameters=False,
        prediction_loss_only=True,
        dataloader_pin_memory=cuda,
        accelerator_config={"non_blocking": cuda},
        **precision_flags(s.precision, n_params, batch_tokens(s)),
    )
    return cls(**{**args, **own})
