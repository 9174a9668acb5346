"""Instruction tuning with TRL's ``SFTTrainer`` / ``SFTConfig`` (trl 1.16), keeping azllm's own training pieces.

:func:`prepare_model` builds what trains, :func:`build_trainer` the trainer, :func:`run_sft` one whole run. What
TRL does and what azllm adds, read in TRL 1.16's source:

- **Masking**: TRL's. Conversations go in as ``messages``; with ``assistant_only_loss`` TRL renders them with the
  chat template's ``{% generation %}`` markers (``return_assistant_tokens_mask``) and sets every other label to
  -100. ``completion_only_loss`` applies to prompt/completion data (azllm turns every format into messages, so the
  assistant mask is what applies). The collator pads labels with -100 by position, never by the pad id, so a base
  whose pad token is its EOS (TRL's default without a pad token) still learns the end-of-turn token (tested).
- **Packing**: TRL's. ``bfd`` (best-fit decreasing) implies ``padding_free``: a packed row carries no attention mask
  but position ids that restart at 0 for each conversation. transformers builds the attention mask from them
  (``find_packed_sequence_indices``, when there is no attention mask and no cache; TRL's ``compute_loss`` turns the
  cache off): on SDPA on a CPU a packed conversation gets the same logits as alone (tested to 1e-5). ``wrapped``
  cuts at ``max_length`` across conversations with a plain causal mask: they attend across their boundaries (the
  test measures it). The held-out split is evaluated unpacked (``eval_packing=False``) so its loss compares across
  packing on and off.
- **The loss** is TRL's fused LM head (``add_fused_lm_head``): log-probabilities of the labelled positions from
  ``lm_head.weight`` in chunks, without the ``B x T x V`` logits. It reads the weight through peft's wrappers
  (``trainable_token_indices`` returns the merged rows), so trained token rows reach the loss (tested).
- **Only labelled positions reach the LM head, on a CPU too**: TRL 1.16 projects only the positions whose label is
  not -100 on Triton devices, but every position elsewhere (a fixed tile shape spares Neuron its recompiles). On a
  CPU that scores the prompt and the padding through the 49k-row head as well:
  :func:`azllm.lifecycle.labelled_positions_only` makes TRL take its own compact path there, for the duration of
  training and evaluation. Measured on SmolLM2-135M (LoRA, 4 conversations x <= 384 tokens, 2 idle cores): 13.5 ->
  8.2 s per step, the same losses.
- **LoRA / QLoRA**: ``peft_config`` (a ``peft.LoraConfig``) is passed to ``SFTTrainer``, which wraps the model.
  azllm builds it: ``model.lora``'s rank, alpha, rsLoRA and targets, and the rows of new tokens trainable
  (:func:`azllm.lora.new_rows_config`: ``trainable_token_indices`` or ``modules_to_save``, as after a vocabulary
  change: here the role tokens of azllm's template). QLoRA's base is quantized by
  :func:`azllm.lora.quantize_model` (the CPU repack guard on), :func:`azllm.lora.prepare_kbit` runs before TRL
  wraps it, and :class:`azllm.callbacks.SafetyCallback` checks the 4-bit layers before training and after every
  evaluation. TRL casts QLoRA's adapter weights to bf16.
- **Liger**: ``use_liger_kernel`` is deprecated in TRL 1.x (its replacement, ``model_init_kwargs={"use_kernels":
  True}``, loads Hub kernels and only applies when TRL loads the model from a name). azllm passes a built model,
  so Liger is applied to the instance by :func:`azllm.model.apply_liger` (rope, RMSNorm, SwiGLU; CUDA only), and
  Liger's fused linear cross-entropy is never used: TRL replaces the forward's loss with its own fused LM head.
- **azllm's callbacks**: :class:`~azllm.callbacks.StopOnSignalCallback` (SIGTERM: the step finishes, a complete
  checkpoint is written, the run stops; :func:`run_sft` returns ``interrupted``),
  :class:`~azllm.callbacks.SafetyCallback` (non-finite loss, finite weights before a checkpoint, the complete
  marker that :func:`azllm.callbacks.latest_checkpoint` trusts, the repack check),
  :class:`~azllm.callbacks.ThroughputCallback` (step times without eval/save intervals, peak memory),
  :class:`~azllm.callbacks.ProgressBarCallback`. Tokens/s counts the real (non-padding) tokens TRL counts.
- **Overfitting**: the held-out split is evaluated every ``eval_steps`` (and before the first step), a checkpoint
  is saved at each evaluation, the best one (lowest held-out loss) is loaded at the end (``keep_best``), and
  ``early_stopping_patience`` stops a run that stopped improving (transformers' ``EarlyStoppingCallback``).
- **Resume**: from the newest complete checkpoint of the run's folder: weights, optimizer, scheduler, RNG and data
  position, so the loss curve is the uninterrupted one (tested).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..assemble import METHODS
from ..callbacks import StopOnSignalCallback, ThroughputCallback
from ..lifecycle import RunParts, RunResult, finish_trainer, labelled_positions_only, run_trainer
from ..loop import LoopSpec, training_arguments
from ..utils import json_hash

__all__ = [
    "SftSpec",
    "sft_key",
    "prepare_model",
    "lora_config",
    "build_trainer",
    "run_sft",
    "load_sft_model",
    "loss_token_share",
]


@dataclass(frozen=True)
class SftSpec(LoopSpec):
    """The SFT loop's arguments: :class:`azllm.loop.LoopSpec` and its own fields, named as in
    :class:`azllm.config.SftConfig` and built from it by :func:`azllm.recipes.sft.sft_spec`. No defaults: a default
    lives in the config alone."""

    max_length: int
    packing: bool
    packing_strategy: str
    assistant_only_loss: bool
    completion_only_loss: bool | None
    keep_best: bool
    early_stopping_patience: int | None


def sft_key(*, model: dict, spec: SftSpec, data: str, **extra) -> str:
    """Everything that shapes an SFT run, hashed (12 hex digits): the model's description, the keyed spec, the
    data's hash and anything else named. It names the run folder and is written to ``results.json``."""
    return json_hash({"model": model, "spec": spec.keyed(), "data": data, **extra}, n=12)


def prepare_model(
    base: str | os.PathLike,
    *,
    method: str,
    new_token_ids: list[int] | None = None,
    dtype: str = "fp32",
    liger: tuple = (),
    quant_bits: int = 4,
    quant_type: str = "nf4",
    double_quant: bool = True,
    compute_dtype: str = "bf16",
    kbit_fp32_rest: bool = False,
    gradient_checkpointing: bool = False,
):
    """The model of an SFT run, before TRL wraps it: the base (safetensors, no remote code), the rows of
    ``new_token_ids`` added (:func:`azllm.sft.template.add_token_rows`), QLoRA's 4/8-bit quantization with the repack
    guard and :func:`azllm.lora.prepare_kbit`, and Liger's layer kernels (never its fused linear
    cross-entropy). Returns ``(model, info)``.

    Why not :func:`azllm.assemble.assemble_model` (the assembly of pretraining, adaptation and the benchmark), whose
    steps it shares (:func:`azllm.lora.quantize_model`, :func:`azllm.model.apply_liger`): TRL wraps the adapters
    itself from the ``peft_config`` it is given (:func:`lora_config`), so the assembly stops before LoRA; the new
    rows are the chat template's role tokens added to the base's own tokenizer, not a tokenizer fitted to a base
    (keep / extend / swap, :func:`azllm.assemble.fit_base`); and QLoRA needs peft's
    :func:`azllm.lora.prepare_kbit` before TRL's wrapping rather than inside :func:`azllm.lora.apply_lora`."""
    from ..assemble import load_base
    from ..lora import prepare_kbit, quantize_model
    from ..model import apply_liger, count_parameters
    from ..utils import torch_dtype
    from .template import add_token_rows

    if method not in METHODS:
        raise ValueError(f"method must be full, lora or qlora, got {method!r}")
    model = load_base(base, torch_dtype(dtype))
    add_token_rows(model, list(new_token_ids or []))
    if method == "qlora":
        model = quantize_model(
            model,
            bits=quant_bits,
            double_quant=double_quant,
            quant_type=quant_type,
            compute_dtype=torch_dtype(compute_dtype),
        )
        model = prepare_kbit(model, fp32_rest=kbit_fp32_rest, gradient_checkpointing=gradient_checkpointing)
    kernels = [k for k in liger if k != "fused_linear_cross_entropy"]
    liger_info = apply_liger(model, kernels) if kernels else {"requested": [], "applied": [], "available": None}
    if "fused_linear_cross_entropy" in liger:
        liger_info["not_used"] = (
            "fused_linear_cross_entropy: TRL's SFTTrainer computes the loss with its own fused LM head"
        )
    return model, {
        "method": method,
        "source": str(base),
        "liger": liger_info,
        "parameters": count_parameters(model),
        "new_token_ids": list(new_token_ids or []),
    }


def lora_config(
    model,
    *,
    r: int,
    alpha: int,
    dropout: float,
    use_rslora: bool = False,
    target_modules="all-linear",
    new_token_ids: list[int] | None = None,
    new_rows: str = "auto",
):
    """The ``peft.LoraConfig`` TRL wraps the model with: adapters on ``target_modules`` and the rows of
    ``new_token_ids`` trainable (:func:`azllm.lora.resolve_new_rows`, :func:`azllm.lora.new_rows_config`)."""
    from peft import LoraConfig

    from ..lora import new_rows_config, resolve_new_rows

    ids = list(new_token_ids or [])
    how = resolve_new_rows(new_rows, n_new=len(ids), vocab_size=model.config.vocab_size)
    rows = new_rows_config(model, ids, how)
    targets = target_modules if isinstance(target_modules, str) else list(target_modules)
    return LoraConfig(
        r=int(r),
        lora_alpha=int(alpha),
        lora_dropout=float(dropout),
        use_rslora=bool(use_rslora),
        target_modules=targets,
        bias="none",
        task_type="CAUSAL_LM",
        **rows,
    )


def sft_config(out: Path, spec: SftSpec, *, eval_on_start: bool, world: int, n_params: int | None = None):
    """TRL's ``SFTConfig`` (a ``TrainingArguments``) from :func:`azllm.loop.training_arguments`, with SFT's own: a
    checkpoint at each evaluation and the best one kept, TRL's length, packing and loss-mask settings, and the
    held-out split evaluated unpacked."""
    from trl import SFTConfig

    s = spec
    return training_arguments(
        SFTConfig,
        out,
        s,
        world=world,
        n_params=n_params,
        eval_on_start=eval_on_start,
        load_best_model_at_end=s.keep_best,
        metric_for_best_model="eval_loss",
        greater_is_better=False,
        max_length=s.max_length,
        packing=s.packing,
        packing_strategy=s.packing_strategy,
        eval_packing=False,
        assistant_only_loss=s.assistant_only_loss,
        completion_only_loss=s.completion_only_loss,
    )


def build_trainer(
    model,
    tokenizer,
    spec: SftSpec,
    *,
    train_convs: list[dict],
    eval_convs: list[dict],
    output_dir: str | os.PathLike,
    peft_config=None,
    eval_on_start: bool = True,
    callbacks=(),
    progress: bool = True,
):
    """The ``SFTTrainer`` of a run with azllm's callbacks; returns ``(trainer, parts)``
    (:class:`azllm.lifecycle.RunParts`). The datasets are TRL-prepared on construction
    (``trainer.train_dataset`` holds ``input_ids`` and ``labels``)."""
    from datasets import Dataset
    from transformers import EarlyStoppingCallback
    from trl import SFTTrainer

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    args = sft_config(
        out, spec, eval_on_start=eval_on_start, world=world, n_params=sum(p.numel() for p in model.parameters())
    )
    stop = StopOnSignalCallback()
    throughput = ThroughputCallback(spec.batch_size * spec.grad_accum * spec.max_length * world, spec.untimed_steps)
    extra = [EarlyStoppingCallback(spec.early_stopping_patience)] if spec.early_stopping_patience else []
    trainer = SFTTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        peft_config=peft_config,
        train_dataset=Dataset.from_list([{"messages": c["messages"]} for c in train_convs]),
        eval_dataset=Dataset.from_list([{"messages": c["messages"]} for c in eval_convs]) if eval_convs else None,
        callbacks=[stop, throughput, *extra, *callbacks],
    )
    return trainer, RunParts(finish_trainer(trainer, out, spec.grad_accum, progress), throughput, stop)


def loss_token_share(dataset) -> dict:
    """Tokens of a TRL-prepared dataset and how many carry loss (label != -100): ``{"tokens", "loss_tokens",
    "share"}``."""
    tokens = sum(len(x) for x in dataset["input_ids"])
    loss = sum(sum(1 for v in y if v != -100) for y in dataset["labels"])
    return {"tokens": tokens, "loss_tokens": loss, "share": loss / tokens if tokens else None}


def run_sft(
    model,
    tokenizer,
    spec: SftSpec,
    *,
    train_convs: list[dict],
    eval_convs: list[dict],
    output_dir: str | os.PathLike,
    key: str,
    peft_config=None,
    info: dict | None = None,
    end_of_turn_id: int | None = None,
    callbacks=(),
    progress: bool = True,
) -> RunResult:
    """One SFT run through :func:`azllm.lifecycle.run_trainer`: train, resuming from the newest complete
    checkpoint of ``key``, keep the best checkpoint, evaluate the held-out split, save the final model with its
    tokenizer and chat template in ``output_dir/final`` and ``results.json``.

    Returns ``{"key", "output_dir", "final_dir", "steps", "seconds", "curves": {"train", "eval"}, "eval_loss",
    "best_step", "throughput": {..., "tokens_per_s", "train_tokens"}, "resumed_from", "interrupted" (on a
    signal), **info}`` plus ``model``, ``trainer`` (not in the JSON)."""
    from ..model import count_parameters

    out = Path(output_dir)
    trainer, parts = build_trainer(
        model,
        tokenizer,
        spec,
        train_convs=train_convs,
        eval_convs=eval_convs,
        output_dir=out,
        peft_config=peft_config,
        callbacks=callbacks,
        progress=progress,
    )
    if end_of_turn_id is not None:  # generation stops at the end of an assistant turn (and at EOS)
        base = trainer.model.get_base_model() if hasattr(trainer.model, "get_base_model") else trainer.model
        eos = [i for i in (end_of_turn_id, tokenizer.eos_token_id) if i is not None]
        base.generation_config.eos_token_id = list(dict.fromkeys(eos))
    mask = loss_token_share(trainer.train_dataset)

    def evaluate(trainer, resumed_from) -> dict:
        own = {**(info or {}), "parameters": count_parameters(trainer.model)}
        metrics = trainer.evaluate() if eval_convs else {}
        thr = parts.throughput.summary()
        tokens = int(trainer._total_train_tokens)  # TRL's count of non-padding training tokens
        done = trainer.state.global_step - (resumed_from and int(Path(resumed_from).name.split("-")[-1]) or 0)
        if thr["timed_steps"] and done:
            per_step = tokens / done
            thr["tokens_per_s"] = per_step * thr["timed_steps"] / sum(parts.throughput.step_times)
            thr["tokens_per_step"] = per_step
        thr["train_tokens"] = tokens
        best = trainer.state.best_model_checkpoint
        return {
            "eval_loss": metrics.get("eval_loss"),
            "best_step": int(Path(best).name.split("-")[-1]) if best else None,
            "best_eval_loss": trainer.state.best_metric,
            "throughput": thr,
            "mask": mask,
            "spec": {**asdict(spec), "report_to": list(spec.report_to)},
            "packing": spec.packing,
            **own,
        }

    return run_trainer(
        trainer,
        parts,
        output_dir=out,
        key=key,
        resume=spec.resume,
        meta={"key": key, "method": (info or {}).get("method")},
        meta_file="azllm_sft.json",
        evaluate=evaluate,
        tokenizer=tokenizer,
        one_set=True,
        inside=labelled_positions_only,
    )


def load_sft_model(
    final_dir: str | os.PathLike,
    *,
    base: str | os.PathLike | None = None,
    new_token_ids=None,
    dtype: torch.dtype = torch.float32,
):
    """A model saved by :func:`run_sft` for generation or export: full weights, or ``base`` (with the rows of
    ``new_token_ids`` added) + the adapter."""
    from transformers import AutoModelForCausalLM

    from ..assemble import load_base
    from .template import add_token_rows

    final_dir = Path(final_dir)
    if (final_dir / "adapter_config.json").is_file():
        from peft import PeftModel

        if base is None:
            raise ValueError(f"{final_dir} holds an adapter: name its base")
        model = load_base(base, dtype)
        add_token_rows(model, list(new_token_ids or []))
        return PeftModel.from_pretrained(model, str(final_dir)).eval()
    return AutoModelForCausalLM.from_pretrained(str(final_dir), dtype=dtype, use_safetensors=True).eval()
