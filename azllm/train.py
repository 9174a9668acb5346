"""Training with the Hugging Face Trainer, fed by token files: full training from scratch, LoRA or QLoRA.

One call, :func:`run_training`, turns a model + a tokenizer + token files + plain training arguments into a
trained model and a plain dict of results (loss and bits-per-byte curves, tokens/s, peak memory, final val
loss/bpb, checkpoint and final folders). The train recipe (:func:`azllm.recipes.train.train_model`) builds the
:class:`TrainSpec` and the model (:func:`azllm.assemble.assemble_model`) from the params and calls it. The HF Trainer
does the loop, so accelerate / DDP / FSDP / DeepSpeed and ``torchrun`` work unchanged
(``torchrun --nproc-per-node 2 -m azllm train params.yaml``). The callbacks named below live in
:mod:`azllm.callbacks` and are imported when a run starts, so that looking up a finished run (:func:`run_key`,
:class:`TrainSpec`) does not load transformers' Trainer stack. Decisions:

- **Data**: training windows are :class:`azllm.tokens.TokenWindowDataset` items (``block_size`` tokens, labels ==
  input ids; the model shifts them). The Trainer's sampler shuffles them (seeded) and, under DDP, gives each rank
  different windows. Evaluation uses ``eval_max_tokens`` tokens of each set as fixed windows spread over the whole set.
- **Bits per byte** (comparable across tokenizers): over the evaluated windows, ``bpb = sum of the next-token NLL
  (nats) / ln 2 / B`` where ``B`` is the number of UTF-8 bytes of the text the *predicted* tokens decode to:
  the predicted ids are cut at every EOS, each piece is decoded with the tokenizer and its UTF-8 bytes are counted,
  and each EOS counts as 1 byte (the newline that separated the documents in the corpus). The summed NLL is the
  Trainer's eval loss times the number of predicted tokens (every window has the same length, so the mean over
  windows is the mean over tokens). Perplexity is ``exp(loss)`` per token of *this* tokenizer (not comparable
  across tokenizers; bpb is).
- **Schedule**: :func:`azllm.loop.training_arguments`, the one builder of every loop's arguments: linear warmup
  then cosine decay to ``lr * min_lr_ratio`` (``cosine_with_min_lr``); AdamW with decay on matrices only;
  gradient clipping; gradient accumulation; gradient checkpointing on request (non-reentrant).
- **Precision**: :func:`azllm.loop.precision_flags` (``auto``: bf16 autocast where it was measured faster).
- **Checkpoints**: every ``save_steps``, safetensors (adapters alone for LoRA/QLoRA, peft's ``save_pretrained``),
  plus optimizer, scheduler, RNG states and the Trainer state, keeping the last ``save_total_limit``. The Trainer
  writes a checkpoint folder in place, so a checkpoint only counts once ``azllm_complete.json`` is written in it
  (atomically, after everything else): resume picks the newest *complete* checkpoint and ignores a half-written one.
- **Resume**: with ``resume`` a run whose output folder holds a complete checkpoint continues from it: weights,
  optimizer, scheduler, RNG states and the data position (the Trainer replays the seeded sampler and skips the
  batches already seen), so the loss curve is the one of an uninterrupted run (tested). The train recipe names the
  output folder by a hash of everything that shapes the run (the ``key``), so a changed run never resumes from
  another's checkpoint, and :func:`azllm.lifecycle.finished_result` returns a finished run as is.
- **Non-finite loss**: a forward hook folds every training loss's ``isfinite`` into an on-device flag, read at
  each logging step and before each checkpoint (where the Trainer syncs anyway), so the check adds no host-device
  sync per step on a GPU; a NaN/inf raises :class:`NonFiniteLossError` naming the step and the last good
  checkpoint, and never reaches a checkpoint. Weights are also checked before each checkpoint is written.
- **Safety**: no ``trust_remote_code``; weights are safetensors; the Trainer loads optimizer/scheduler/RNG states
  with ``torch.load(weights_only=True)``.
- **Interruptions**: SIGTERM (a spot notice, a preemption) finishes the step, writes a complete checkpoint and
  stops (:class:`StopOnSignalCallback`); the result says ``interrupted`` and a restart resumes from it. Under
  several processes the ranks agree on the stop step (one all-reduce of the flag at logging, evaluation and save
  steps, never per step), so a signal that reaches one rank only, or the ranks on different steps, stops all of
  them on the same step. The stop callback runs before the safety callback, so the checkpoint of a stop is checked
  for a non-finite loss and weights like any other. The first train loss logged after a resume between two logging
  steps averages only the steps since the resume: the Trainer's running loss is not in the checkpoint (left so:
  restoring it means writing the Trainer's private ``_tr_loss`` per rank into every checkpoint).
- **No wasted steps** (measured by :mod:`azllm.bench.overhead` against a bare nanoGPT-style loop): on CPU the process
  keeps freed memory for the next step (:func:`azllm.lifecycle.keep_freed_memory`, glibc's trim and mmap thresholds;
  without it every step faulted 10-30k fresh pages back in, 10-20% of a step); the loss is the plain batch mean, not the
  Trainer's sum over a token count (the windows are never padded, so both are the same number, and the count costs an
  all-gather over the processes every step); the FLOP estimate does not count the parameters every step; DDP does not
  search for unused parameters (every trainable weight is used); on a GPU the batch goes to the device from pinned
  memory without a blocking copy, and no callback synchronizes the device on its own (throughput and the non-finite flag
  are read where the Trainer syncs anyway: logging steps, evaluations, checkpoints).
- **FSDP** (``fsdp``, ``fsdp_config``: the Trainer's arguments, FSDP2 by default, the decoder layers wrapped):
  the same run sharded over the processes of ``torchrun``; the final model is gathered by every rank and written
  by rank 0. Checked on CPU against a single-process run (tests/test_train_distributed.py).
- **Progress**: one bar of optimizer steps (:class:`ProgressBarCallback`) on the terminal or the run's log; the
  Trainer's own bars, notebook table and log printing are off, so report pages stay clean.
- **Throughput** (:class:`ThroughputCallback`): tokens/s over optimizer steps after ``untimed_steps``,
  leaving out intervals that contained an evaluation or a checkpoint; step time; peak memory: CUDA
  ``max_memory_allocated`` / ``max_memory_reserved``, on CPU the peak RSS sampled at every step of this run
  (``peak_rss_mb``) and the process's lifetime peak (``ru_maxrss``).
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .assemble import METHODS  # noqa: F401  (one list of training methods)
from .lifecycle import RunParts, RunResult, run_trainer
from .loop import LoopSpec, training_arguments
from .utils import atomic_write_json, json_hash

__all__ = [
    "TrainSpec",
    "run_key",
    "run_training",
    "count_bytes",
    "bytes_per_token",
    "make_eval_set",
    "load_trained",
    "generate",
    "METHODS",
]

# ----------------------------------------------------------------------------------------------------- data


def count_bytes(ids, tokenizer, eos_id: int | None = None) -> int:
    """UTF-8 bytes of the text that ``ids`` decode to, each EOS counting 1 byte (the document separator).

    >>> count_bytes(tok.encode("Salam") + [tok.eos_id] + tok.encode("dünya"), tok)  # doctest: +SKIP
    12
    """
    eos = tokenizer.eos_id if eos_id is None else eos_id
    ids = np.asarray(ids, dtype=np.int64).ravel()
    cuts = np.flatnonzero(ids == eos) if eos is not None else np.zeros(0, dtype=np.int64)
    total, start = 0, 0
    for c in list(cuts) + [len(ids)]:
        if c > start:
            total += len(tokenizer.decode(ids[start:c].tolist()).encode("utf-8"))
        start = c + 1
    return total + len(cuts)


def bytes_per_token(token_file, tokenizer, max_tokens: int = 200_000) -> float:
    """UTF-8 bytes per token over the first ``max_tokens`` tokens of a token file (see :func:`count_bytes`).

    Used to put the *training* loss on the bits-per-byte scale (``bpb ~ loss / ln 2 / bytes_per_token``), an
    approximation since the training windows are random; the evaluation bpb is exact.
    """
    from .tokens import TokenFile

    tf = token_file if isinstance(token_file, TokenFile) else TokenFile(token_file, tokenizer)
    ids = np.asarray(tf.tokens[:max_tokens], dtype=np.int64)
    return count_bytes(ids, tokenizer, tf.eos_id) / max(len(ids), 1)


def make_eval_set(token_file, tokenizer, block_size: int, max_tokens: int | None = None) -> dict:
    """Fixed evaluation windows spread evenly over a whole token file, and the bytes their predictions cover.

    Returns ``{"dataset", "windows", "predicted_tokens", "bytes"}``. Window ``k`` holds tokens ``[k*B, (k+1)*B)``;
    the model predicts tokens ``k*B+1 .. (k+1)*B-1`` from it. Every window when ``max_tokens`` covers the file (or is
    None), else ``max_tokens // B`` of them at evenly spaced ``k`` from the first window to the last: a validation
    file is in corpus order, so its start alone would measure its first source.
    """
    from torch.utils.data import Subset

    from .tokens import TokenFile, TokenWindowDataset

    tf = token_file if isinstance(token_file, TokenFile) else TokenFile(token_file, tokenizer)
    ds = TokenWindowDataset(tf, block_size)
    n = len(ds) if not max_tokens else max(1, min(len(ds), int(max_tokens) // block_size))
    ks = np.arange(n) if n == len(ds) else np.linspace(0, len(ds) - 1, n).round().astype(np.int64)
    toks = np.stack([np.asarray(tf.tokens[k * block_size : (k + 1) * block_size], dtype=np.int64) for k in ks])
    pred = toks[:, 1:]
    nbytes = sum(count_bytes(row, tokenizer, tf.eos_id) for row in pred)
    return {
        "dataset": Subset(ds, ks.tolist()),
        "windows": n,
        "predicted_tokens": int(pred.size),
        "bytes": int(nbytes),
    }


# ---------------------------------------------------------------------------------------------------- train


@dataclass(frozen=True)
class TrainSpec(LoopSpec):
    """The pretraining / adaptation loop's arguments: :class:`azllm.loop.LoopSpec` and its own fields, named as in
    :class:`azllm.config.TrainConfig` and built from it by :func:`azllm.recipes.train.train_spec`. No defaults: a
    default lives in the config alone."""

    block_size: int
    eval_max_tokens: int | None
    save_steps: int
    eval_on_start: bool
    rows_only_steps: int
    fsdp: bool
    fsdp_config: dict

    def keyed(self) -> dict:
        """The fields that shape the run (:meth:`LoopSpec.keyed`); FSDP's only when it is on (its checkpoints are
        sharded differently: a run of its own)."""
        out = super().keyed()
        if not self.fsdp:
            out.pop("fsdp"), out.pop("fsdp_config")
        return out


def run_key(*, model: dict, train: TrainSpec, tokenizer: str, data: dict, **extra) -> str:
    """Everything that shapes a training run, hashed (12 hex digits): the model's spec
    (:class:`azllm.assemble.ModelSpec` as a dict), the training loop's :meth:`TrainSpec.keyed` fields, the
    tokenizer's fingerprint, the token files' keys (``data``) and anything else the caller names (``extra``).
    It names the run's output folder and is written to its ``results.json`` (:func:`azllm.lifecycle.finished_result`).

    >>> import dataclasses
    >>> from azllm import recipes
    >>> from azllm.recipes.train import train_spec
    >>> spec = train_spec(recipes.load(None))
    >>> run_key(model={"preset": "tiny"}, train=spec, tokenizer="f", data={}) == run_key(
    ...     model={"preset": "tiny"}, train=dataclasses.replace(spec, resume=False, report_to=()), tokenizer="f",
    ...     data={})
    True
    """
    return json_hash({"model": model, "train": train.keyed(), "tokenizer": tokenizer, "data": data, **extra}, n=12)


def run_training(
    model,
    spec: TrainSpec,
    *,
    tokenizer,
    train_file,
    eval_files: dict,
    output_dir: str | os.PathLike,
    key: str,
    info: dict | None = None,
    callbacks: list | tuple = (),
    progress: bool = True,
    loss_fn=None,
) -> RunResult:
    """Train ``model`` with the HF Trainer on a token file as ``spec`` says and return a plain dict of results.

    ``train_file``: an :mod:`azllm.tokens` file made with ``tokenizer``; ``eval_files``: ``{name: path}`` (``val`` and
    dev sets); ``key``: what identifies the run (:func:`run_key`; written to ``results.json``, see
    :func:`azllm.lifecycle.finished_result`); ``info``: what the caller knows about the model (Liger report, parameters,
    source), copied to the results. Of ``spec``: ``eval_on_start`` evaluates before the first step too (the curves then
    start at step 0, the model as given); ``report_to`` names the Trainer's experiment trackers (``tensorboard`` writes
    to ``output_dir/runs/``); ``rows_only_steps`` is a two-stage schedule for adapters: the first steps update only the
    trainable token rows (:class:`RowsFirstCallback`), then LoRA's matrices join; ``fsdp`` / ``fsdp_config`` shard
    through the Trainer (``fsdp_config`` keys as in transformers', over ``{"version": 2}``); a launch that accelerate
    runs as plain data parallel anyway (CPU) is warned about. ``loss_fn``: a loss of the run's own, ``loss_fn(model,
    inputs) -> loss`` in place of the model's (distillation: :class:`azllm.distill. DistillLoss`), in training and
    evaluation, seen by the non-finite check like the model's own.

    Steps: eval windows -> Trainer (callbacks, optimizer) -> :func:`azllm.lifecycle.run_trainer` (train, resuming
    from the newest complete checkpoint of this key -> final evaluation -> final model folder -> ``results.json``).

    Returns ``{"method", "output_dir", "final_dir", "checkpoint", "curves": {"train": [...], "eval": {set: [...]}},
    "final": {set: {"loss", "ppl", "bpb"}}, "throughput": {...}, "steps", "seconds", "resumed_from",
    "eval_sets": {...}, **info}`` plus ``model`` and ``trainer`` (not in the JSON).
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if int(os.environ.get("RANK", "0")) == 0:  # what a checkpoint of this run was trained with (azllm eval reads it)
        atomic_write_json(
            out / "azllm_run.json", {"tokenizer_path": tokenizer.path, "tokenizer": tokenizer.fingerprint, "key": key}
        )
    eval_info = {
        name: make_eval_set(path, tokenizer, spec.block_size, spec.eval_max_tokens) for name, path in eval_files.items()
    }
    world = int(os.environ.get("WORLD_SIZE", "1"))
    trainer, parts = _trainer(model, spec, tokenizer, train_file, eval_info, out, world, callbacks, progress, loss_fn)

    def evaluate(trainer, resumed_from) -> dict:
        from .callbacks import latest_checkpoint

        ck = latest_checkpoint(out, key=key)
        return {
            "checkpoint": str(ck) if ck else None,
            "final": _final_metrics(trainer, parts.safety, eval_info),
            "eval_sets": {k: {kk: vv for kk, vv in v.items() if kk != "dataset"} for k, v in eval_info.items()},
            "world_size": world,
            "precision": {"bf16": trainer.args.bf16, "fp16": trainer.args.fp16},
            "lr": spec.lr,
            "max_steps": spec.max_steps,
            "fsdp": bool(trainer.is_fsdp_enabled),
            **(info or {}),
        }

    meta = {"tokenizer": tokenizer.fingerprint, "tokenizer_path": tokenizer.path, "key": key}
    meta |= {k: v for k, v in (info or {}).items() if k == "method"}
    result = run_trainer(
        trainer,
        parts,
        output_dir=out,
        key=key,
        resume=spec.resume,
        meta=meta,
        meta_file="azllm_model.json",
        evaluate=evaluate,
    )
    return {**result, "model": model}


def _trainer(
    model,
    spec: TrainSpec,
    tokenizer,
    train_file,
    eval_info: dict,
    out: Path,
    world: int,
    callbacks,
    progress: bool,
    loss_fn=None,
):
    """The Trainer of a run with azllm's callbacks (safety, throughput, SIGTERM, the rows-first schedule, the
    progress bar), adjusted by :func:`_adjust`; returns ``(trainer, RunParts)``."""
    from transformers import Trainer

    from .callbacks import (
        ProgressBarCallback,
        RowsFirstCallback,
        SafetyCallback,
        StopOnSignalCallback,
        ThroughputCallback,
    )
    from .tokens import TokenFile, TokenWindowDataset

    throughput = ThroughputCallback(spec.batch_size * spec.grad_accum * spec.block_size * world, spec.untimed_steps)
    safety = SafetyCallback(model, eval_info, out, spec.grad_accum)
    stop = StopOnSignalCallback()
    rows_first = [RowsFirstCallback(spec.rows_only_steps)] if spec.rows_only_steps else []
    n_params = sum(p.numel() for p in model.parameters())
    trainer = Trainer(
        model=model,
        args=_training_arguments(out, spec, world=world, n_params=n_params),
        train_dataset=TokenWindowDataset(TokenFile(train_file, tokenizer), spec.block_size),
        eval_dataset={k: v["dataset"] for k, v in eval_info.items()},
        callbacks=[stop, safety, throughput, *callbacks, *rows_first],
    )
    _adjust(
        trainer,
        model,
        spec.optimizer,
        dict(lr=spec.lr, weight_decay=spec.weight_decay, betas=tuple(spec.betas)),
        fsdp=spec.fsdp,
    )
    if loss_fn is not None:
        trainer.compute_loss = functools.partial(_own_loss, loss_fn, safety)
    if progress:
        trainer.add_callback(ProgressBarCallback())
    return trainer, RunParts(safety, throughput, stop)


def _own_loss(loss_fn, safety, model, inputs, return_outputs=False, num_items_in_batch=None):
    """The Trainer's ``compute_loss`` for a run with its own loss (``loss_fn(model, inputs)``, e.g.
    :class:`azllm.distill.DistillLoss`): the non-finite check sees every training loss, as the forward hook does."""
    loss = loss_fn(model, inputs)
    if model.training:
        safety.observe(loss)
    return (loss, {}) if return_outputs else loss


def _training_arguments(out: Path, spec: TrainSpec, *, world: int, n_params: int | None = None):
    """The Trainer's arguments (:func:`azllm.loop.training_arguments`), with pretraining's own: a checkpoint every
    ``save_steps``, the windows' columns kept, and FSDP on request."""
    from transformers import TrainingArguments

    return training_arguments(
        TrainingArguments,
        out,
        spec,
        world=world,
        n_params=n_params,
        save_steps=spec.save_steps,
        eval_on_start=spec.eval_on_start,
        remove_unused_columns=False,
        fsdp=bool(spec.fsdp),
        fsdp_config={"version": 2, **(spec.fsdp_config or {})} if spec.fsdp else None,
    )


def _adjust(trainer, model, optimizer: str, opt_kwargs: dict, *, fsdp: bool) -> None:
    """What azllm changes on a new Trainer: the loss is the plain batch mean (the windows are never padded, so it
    is the token mean), azllm's optimizer is built when the Trainer asks for it (:func:`_create_optimizer`), the
    FLOP count is kept without counting the parameters every step, the Trainer's own log printing and bars are off
    (log dicts stay out of stdout and out of report pages), and FSDP that accelerate does not run is warned about."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.model_accepts_loss_kwargs = False
    trainer.create_optimizer = functools.partial(_create_optimizer, trainer, optimizer, opt_kwargs)
    if hasattr(model, "num_parameters"):
        n_flop_params = model.num_parameters(exclude_embeddings=True)
        trainer.floating_point_ops = lambda inputs: 6 * inputs["input_ids"].numel() * n_flop_params
    if fsdp and not trainer.is_fsdp_enabled:
        warnings.warn(
            f"train.fsdp is set, but accelerate runs this launch as {trainer.accelerator.distributed_type} "
            "(it turns only GPU launches into FSDP): training continues as plain data parallel",
            stacklevel=2,
        )
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def _create_optimizer(trainer, name: str, kwargs: dict, model=None):
    """The Trainer's ``create_optimizer``: :func:`azllm.lora.make_optimizer`, built when the Trainer asks for it, so
    that FSDP and DeepSpeed get it where they need it (the Trainer refuses a ready optimizer under FSDP)."""
    from .lora import make_optimizer

    if trainer.optimizer is None:
        trainer.optimizer = make_optimizer(trainer.model if model is None else model, name, **kwargs)
    return trainer.optimizer


def uniform_bpb(vocab_size: int, predicted_tokens: int, nbytes: int) -> float:
    """The bits per byte of a uniform guess over ``vocab_size`` tokens on an eval set (:func:`make_eval_set`'s
    ``predicted_tokens`` and ``bytes``): the baseline a model's bpb on *that* set is read against.

    >>> uniform_bpb(8, 10, 30)  # 3 bits per token, 3 bytes per token
    1.0
    """
    return math.log2(vocab_size) * predicted_tokens / nbytes


def _final_metrics(trainer, safety, eval_info: dict) -> dict:
    """Loss, perplexity and bpb of every eval set at the last step (evaluated again unless it just was), and the
    bpb of a uniform guess over the model's vocabulary on the same set (:func:`uniform_bpb`)."""
    hist = trainer.state.log_history
    step = trainer.state.global_step
    last = [h for h in hist if "eval_val_loss" in h]
    if last and last[-1]["step"] == step:
        metrics = {k: v for h in hist if h.get("step") == step for k, v in h.items() if k.startswith("eval_")}
    else:
        metrics = trainer.evaluate()
        safety.on_evaluate(trainer.args, trainer.state, trainer.control, metrics=metrics)
    vocab = trainer.model.get_output_embeddings().weight.shape[0]
    return {
        name: {
            **{m: metrics.get(f"eval_{name}_{m}") for m in ("loss", "ppl", "bpb")},
            "uniform_bpb": uniform_bpb(vocab, info["predicted_tokens"], info["bytes"]),
        }
        for name, info in eval_info.items()
    }


def load_trained(final_dir: str | os.PathLike, dtype: torch.dtype = torch.float32):
    """Load a model saved by :func:`run_training` (full weights, or a base + LoRA adapter) for generation."""
    from transformers import LlamaForCausalLM

    final_dir = Path(final_dir)
    if (final_dir / "adapter_config.json").is_file():
        from peft import AutoPeftModelForCausalLM

        return AutoPeftModelForCausalLM.from_pretrained(str(final_dir), dtype=dtype)
    return LlamaForCausalLM.from_pretrained(str(final_dir), dtype=dtype, use_safetensors=True)


def generate(
    model,
    tokenizer,
    prompts: list[str],
    *,
    max_new_tokens: int = 40,
    temperature: float = 0.8,
    top_k: int = 50,
    seed: int = 0,
) -> list[dict]:
    """Greedy and sampled continuations of each prompt from the one engine (:mod:`azllm.engine`):
    ``[{"prompt", "greedy", "sampled"}]``, an answer that ended on EOS marked `` ⏎``.

    The prompt is encoded without special tokens after an EOS (as in the token files, where documents follow an
    EOS). Sampling is seeded, one prompt at a time.
    """
    from .engine import Decoding, torch_engine

    engine = torch_engine(model, tokenizer, stop_ids=[tokenizer.eos_id], batch_size=1)
    modes = {
        "greedy": Decoding(max_new_tokens=max_new_tokens, seed=seed),
        "sampled": Decoding(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, seed=seed),
    }
    done = {mode: engine.complete(list(prompts), d) for mode, d in modes.items()}
    return [
        {"prompt": p, **{m: c[i]["text"] + (" ⏎" if c[i]["stopped"] else "") for m, c in done.items()}}
        for i, p in enumerate(prompts)
    ]
