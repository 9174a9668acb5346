"""The one run lifecycle of every training stage: pretraining and adaptation (:func:`azllm.train.run_training`,
which distillation calls with its own loss), SFT (:func:`azllm.sft.train.run_sft`) and preference tuning
(:func:`azllm.prefer.train.run_preference`). Each stage builds its Trainer with azllm's callbacks
(:class:`RunParts`) and hands it to :func:`run_trainer` with what is its own: how it evaluates at the end and
what it adds to the result. The steps, written once here:

1. **Resume only from this run's key**: the safety callback writes the key into every checkpoint's completeness
   marker, and :func:`azllm.callbacks.latest_checkpoint` picks the newest complete checkpoint with that key.
2. **Train under the signal guard**: SIGTERM finishes the step, writes a complete checkpoint and stops
   (:class:`azllm.callbacks.StopOnSignalCallback`); the run then returns :func:`interrupted_result` and a restart
   resumes. On a CPU the process keeps freed memory first (:func:`keep_freed_memory`).
3. **Evaluate** (the stage's ``evaluate``), **save the final model** (:func:`save_final`) and **write
   ``results.json``** atomically (rank 0).
4. **A finished run is found by its key** (:func:`finished_result`) and returned as it is.

The TRL-trained stages (SFT, preference tuning) share :func:`finish_trainer` and :func:`labelled_positions_only`,
which live here so that no stage imports another.

The callbacks (and with them transformers' Trainer stack, which imports peft and bitsandbytes) are imported when a
run starts, so a process that only reads results, such as :class:`RunResult` for an evaluation or a deployment,
does not load them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from .utils import atomic_write_json, replace_dir

if TYPE_CHECKING:
    from .callbacks import SafetyCallback, StopOnSignalCallback, ThroughputCallback

__all__ = [
    "RunParts",
    "RunResult",
    "run_trainer",
    "finished_result",
    "interrupted_result",
    "save_final",
    "curves",
    "keep_freed_memory",
    "finish_trainer",
    "expose_head_bias",
    "labelled_positions_only",
    "end_distributed",
]


@dataclass
class RunParts:
    """azllm's callbacks on a built Trainer that the lifecycle reads: the safety check (non-finite loss,
    completeness markers), the throughput meter and the signal guard."""

    safety: SafetyCallback
    throughput: ThroughputCallback
    stop: StopOnSignalCallback


class RunResult(TypedDict, total=False):
    """What every stage's run returns (``results.json`` holds it less ``model`` and ``trainer``). The common keys
    are :func:`run_trainer`'s; each stage adds its own (pretraining: ``final``, ``eval_sets``; SFT:
    ``eval_loss``, ``best_step``, ``mask``; preference tuning: ``eval``). A run a signal stopped has
    ``interrupted`` and ``checkpoint`` and no ``final_dir`` (:func:`interrupted_result`); a finished run found by
    its key has ``cached``."""

    key: str
    method: str
    output_dir: str
    final_dir: str
    checkpoint: str | None
    resumed_from: str | None
    steps: int
    seconds: float
    curves: dict
    throughput: dict
    cached: bool
    interrupted: str
    final: dict[str, dict]
    eval_sets: dict[str, dict]
    eval_loss: float | None
    eval: dict
    model: Any
    trainer: Any


def run_trainer(
    trainer,
    parts: RunParts,
    *,
    output_dir: str | os.PathLike,
    key: str,
    resume: bool,
    meta: dict,
    meta_file: str,
    evaluate: Callable[[Any, Path | None], dict],
    tokenizer=None,
    one_set: bool = False,
    inside: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> RunResult:
    """Run a built ``trainer`` through the lifecycle (module docstring) and return its :class:`RunResult`.

    ``evaluate(trainer, resumed_from)``: the stage's end of run, called after training (inside ``inside``); what
    it returns is merged over the common keys (so a stage may refine ``throughput``). ``meta`` goes into
    ``meta_file`` of the final folder (:func:`save_final`), with the tokenizer when given. ``one_set``: the trainer
    logs one held-out set as ``eval_loss`` (:func:`curves`). ``inside``: a context for training and evaluation
    (TRL stages: :func:`labelled_positions_only`)."""
    import torch

    from .callbacks import latest_checkpoint

    out = Path(output_dir)
    parts.safety.key = key  # checkpoints carry the run key: a run resumes only its own
    ck = latest_checkpoint(out, key=key) if resume else None
    malloc = keep_freed_memory() if not torch.cuda.is_available() else False
    t0 = time.perf_counter()
    try:
        with inside():
            trainer.train(resume_from_checkpoint=str(ck) if ck else None)
    finally:
        parts.safety.handle.remove()
    seconds = time.perf_counter() - t0
    if parts.stop.stopped:
        return interrupted_result(trainer, key=key, out=out, seconds=seconds, stopped=parts.stop.stopped)
    with inside():
        own = evaluate(trainer, ck)
    final_dir = save_final(trainer, out, meta, tokenizer=tokenizer, meta_file=meta_file)
    result = {
        "key": key,
        "output_dir": str(out),
        "final_dir": str(final_dir),
        "resumed_from": str(ck) if ck else None,
        "steps": trainer.state.global_step,
        "seconds": seconds,
        "curves": curves(trainer.state.log_history, one_set=one_set),
        "throughput": parts.throughput.summary(),
        "freed_memory_kept": malloc,
        "cached": False,
        **own,
    }
    if trainer.is_world_process_zero():
        atomic_write_json(out / "results.json", result)
    return {**result, "model": trainer.model, "trainer": trainer}


def finished_result(output_dir: str | os.PathLike, key: str) -> RunResult | None:
    """The ``results.json`` of a run in ``output_dir`` that finished with the same ``key``, else None."""
    path = Path(output_dir) / "results.json"
    if path.is_file():
        done = json.loads(path.read_text())
        if done.get("key") == key:
            return {**done, "cached": True}
    return None


def interrupted_result(trainer, *, key: str, out: Path, seconds: float, stopped) -> RunResult:
    """The result of a run a signal stopped (every rank wrote a complete checkpoint at this step; no final
    evaluation, no ``results.json``): the run resumes from ``checkpoint`` when it is started again."""
    from .callbacks import latest_checkpoint

    return {
        "key": key,
        "interrupted": stopped,
        "steps": trainer.state.global_step,
        "seconds": seconds,
        "output_dir": str(out),
        "checkpoint": str(latest_checkpoint(out, key=key)),
        "model": trainer.model,
        "trainer": trainer,
    }


def save_final(trainer, out: Path, meta: dict, *, tokenizer=None, meta_file: str = "azllm_model.json") -> Path:
    """The final model (adapters alone for LoRA) in ``out/final`` with ``meta`` in ``meta_file`` and, when given,
    the tokenizer and its chat template, written to a temporary folder and renamed. Every rank calls
    ``save_model`` (FSDP and ZeRO-3 gather the full weights together); rank 0 writes."""
    final_dir = out / "final"
    tmp = out / ".final.tmp"
    if trainer.is_world_process_zero():
        shutil.rmtree(tmp, ignore_errors=True)
    trainer.save_model(str(tmp))
    if trainer.is_world_process_zero():
        if tokenizer is not None:
            tokenizer.save_pretrained(str(tmp))
        atomic_write_json(tmp / meta_file, meta)
        replace_dir(tmp, final_dir)
    return final_dir


def curves(log_history: list[dict], *, one_set: bool = False) -> dict:
    """The curves of a Trainer's ``log_history``, the one reader for every stage: ``{"train": [{"step", "loss",
    "lr", "grad_norm"}], "eval": {set: [{"step", "loss", "ppl", "bpb"}]}}``, a set per ``eval_<set>_loss`` key.
    ``one_set``: the trainer evaluates one held-out set, logged as ``eval_loss`` (TRL's trainers), and ``"eval"``
    is that set's list.

    >>> log = [{"step": 1, "loss": 2.0, "learning_rate": 1e-3}, {"step": 1, "eval_loss": 2.5}]
    >>> curves(log, one_set=True)["eval"]
    [{'step': 1, 'loss': 2.5, 'ppl': None, 'bpb': None}]
    """
    train = [
        {"step": h["step"], "loss": h["loss"], "lr": h.get("learning_rate"), "grad_norm": h.get("grad_norm")}
        for h in log_history
        if "loss" in h
    ]
    evals: dict[str, list] = {}
    for h in log_history:
        for k, v in h.items():
            if k.startswith("eval_") and k.endswith("_loss"):
                name = k[len("eval_") : -len("_loss")]
                evals.setdefault(name, []).append(
                    {"step": h["step"], "loss": v, "ppl": h.get(f"eval_{name}_ppl"), "bpb": h.get(f"eval_{name}_bpb")}
                )
    return {"train": train, "eval": evals.get("", []) if one_set else evals}


def keep_freed_memory() -> bool:
    """Keep memory that training frees inside the process for the next step (CPU, glibc), as PyTorch's caching
    allocator does on a GPU: glibc's trim threshold to 1 GiB and its mmap threshold to the 32 MiB maximum, both fixed
    (by default glibc adapts them and hands the step's activations back to the OS, so the next step faults them in
    again: 10-30k page faults per step and 10-20% of the step time at the tiny preset, measured). Process-wide and
    left in place; nothing happens where the environment sets glibc's malloc itself (``MALLOC_TRIM_THRESHOLD_``,
    ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_MMAP_MAX_``, ``MALLOC_TOP_PAD_``, ``GLIBC_TUNABLES``: the memory benchmark
    does) or off glibc. Returns whether it applied."""
    import ctypes
    import sys

    names = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_", "MALLOC_TOP_PAD_")
    if (
        not sys.platform.startswith("linux")
        or any(n in os.environ for n in names)
        or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")
    ):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only  # noqa: B018
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    return bool(libc.mallopt(m_trim_threshold, 1 << 30)) and bool(libc.mallopt(m_mmap_threshold, 32 << 20))


def finish_trainer(trainer, out: Path, grad_accum: int, progress: bool) -> SafetyCallback:
    """What every TRL trainer of azllm gets after it is built (SFT, preference tuning): the LM head's bias exposed
    (:func:`expose_head_bias`), the :class:`~azllm.callbacks.SafetyCallback` (returned), transformers' printer and
    bar replaced by azllm's progress bar (or none)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from .callbacks import ProgressBarCallback, SafetyCallback

    expose_head_bias(trainer.model)
    safety = SafetyCallback(trainer.model, {}, out, grad_accum)
    trainer.add_callback(safety)
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    if progress:
        trainer.add_callback(ProgressBarCallback())
    return safety


def expose_head_bias(model) -> bool:
    """TRL's fused LM head reads ``lm_head.weight`` and ``lm_head.bias``; peft's ``TrainableTokensWrapper`` (the
    output layer of a model with trainable token rows) serves ``weight`` (the merged rows) but not ``bias`` (peft
    0.21.2, trl 1.16.0: an AttributeError at the first step). The wrapper gets the wrapped layer's bias as a plain
    attribute (None for Llama's lm_head); returns whether it was needed."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None or type(head).__name__ != "TrainableTokensWrapper" or "bias" in vars(head):
        return False
    try:
        _ = head.bias
        return False
    except AttributeError:
        object.__setattr__(head, "bias", getattr(head.original_module, "bias", None))
        return True


@contextlib.contextmanager
def labelled_positions_only():
    """Within the block, TRL's fused LM head scores only the positions that carry a label on a CPU too
    (:mod:`azllm.sft.train`'s docstring): ``trl.trainer.utils._use_triton`` (which picks TRL's compact path, and
    nothing else in that module) answers True for a CPU device; the kernels keep their own check and run as torch
    ops. Restored on exit. A TRL without that function is left as it is, with a warning."""
    import trl.trainer.utils as tu

    before = getattr(tu, "_use_triton", None)
    if before is None:
        import warnings

        warnings.warn(
            "trl.trainer.utils._use_triton not found (another TRL version): TRL's fused LM head scores "
            "every position on a CPU",
            stacklevel=2,
        )
        yield False
        return
    tu._use_triton = lambda device: device.type == "cpu" or before(device)
    try:
        yield True
    finally:
        tu._use_triton = before


def end_distributed() -> bool:
    """Destroy the default process group when this process has one (the Trainer makes it under ``torchrun``); True
    when it did. A launcher's entry calls it before exiting: left to the interpreter's finalization, gloo's worker
    threads can still hold work whose tensors need the interpreter, and the process aborts (SIGABRT) after a run that
    succeeded (pytorch/pytorch PR 179291). Without a process group it does nothing.

    >>> end_distributed()
    False
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return False
    dist.destroy_process_group()
    return True
