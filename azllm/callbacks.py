"""The Trainer callbacks of azllm training (:func:`azllm.train.run_training` adds them): throughput and peak
memory, the non-finite loss stop and checkpoint safety, SIGTERM handling, the rows-first adapter schedule and the
progress bar; and :func:`latest_checkpoint`, which only trusts checkpoints marked complete."""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path

import numpy as np
import psutil
import torch

from .utils import atomic_write_json, peak_rss_mb, progress, reset_peak_rss, vm_hwm_mb

__all__ = [
    "ThroughputCallback",
    "SafetyCallback",
    "StopOnSignalCallback",
    "RowsFirstCallback",
    "ProgressBarCallback",
    "NonFiniteLossError",
    "latest_checkpoint",
    "COMPLETE",
]

COMPLETE = "azllm_complete.json"


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


def _trainer_callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class ThroughputCallback(_trainer_callback_base()):
    """Tokens/s (after ``untimed_steps``, without eval/save intervals), step time and peak memory of a run.

    Peak memory: on CUDA ``max_memory_allocated`` / ``max_memory_reserved`` since the start of training; on CPU
    ``peak_rss_mb`` is the process's RSS high-water mark since the start of training (Linux ``VmHWM``, reset at
    train begin through ``/proc/self/clear_refs``; elsewhere the maximum of the RSS sampled after every step), and
    ``process_peak_rss_mb`` the lifetime ``ru_maxrss`` (which a child process inherits from its parent).

    The clock is read at the end of every step on CPU. On a GPU it is read (after ``torch.cuda.synchronize()``) only
    where the Trainer waits for the device anyway: logging steps (it reads the loss), before an evaluation or a
    checkpoint and at the last step; each step between two readings is credited the interval's mean, so timing
    never adds a host-device sync of its own.

    ``tokens_per_step`` = per-device batch x grad accumulation x block size x world size. Results in
    :meth:`summary`; per-step times in ``step_times``.
    """

    def __init__(self, tokens_per_step: int, untimed_steps: int):
        self.tokens_per_step = int(tokens_per_step)
        self.untimed_steps = int(untimed_steps)
        self.step_times: list[float] = []
        self._mark = None  # (clock, global step) of the last reading that starts a timed interval
        self.peak_rss = 0.0
        self.cuda = torch.cuda.is_available()

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def on_train_begin(self, args, state, control, **kw):
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self._hwm_reset = reset_peak_rss()
        self._start_step = state.global_step
        self._mark = None

    def on_step_end(self, args, state, control, **kw):
        if not self._hwm_reset:  # without a resettable high-water mark: sample the RSS
            self.peak_rss = max(self.peak_rss, psutil.Process().memory_info().rss / 2**20)
        if self.cuda and not (
            control.should_log or control.should_evaluate or control.should_save or control.should_training_stop
        ):
            return
        now = self._now()
        if self._mark is not None:
            steps = state.global_step - self._mark[1]
            self.step_times.extend([(now - self._mark[0]) / steps] * steps)
        self._mark = (now, state.global_step) if state.global_step - self._start_step >= self.untimed_steps else None

    def on_evaluate(self, args, state, control, **kw):
        self._mark = None  # the interval after an evaluation starts at the next reading

    def on_save(self, args, state, control, **kw):
        self._mark = None

    def summary(self) -> dict:
        t = self.step_times
        out = {
            "timed_steps": len(t),
            "tokens_per_step": self.tokens_per_step,
            "step_time_s": float(np.median(t)) if t else None,
            "tokens_per_s": self.tokens_per_step * len(t) / sum(t) if t else None,
            "peak_rss_mb": round(self.peak_rss, 1),
            "process_peak_rss_mb": round(peak_rss_mb(), 1),
        }
        hwm = vm_hwm_mb()
        if hwm is not None and getattr(self, "_hwm_reset", False):
            out["peak_rss_mb"] = round(max(hwm, self.peak_rss), 1)
        if self.cuda:
            out["cuda_max_allocated_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
            out["cuda_max_reserved_mb"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
        return out


class SafetyCallback(_trainer_callback_base()):
    """Non-finite loss stop, finite weights before every checkpoint, complete-checkpoint marker, 4-bit repack check,
    and bits per byte / perplexity added to every evaluation's metrics.

    The loss check never syncs the host with the device on its own: a forward hook folds ``isfinite(loss)`` into an
    on-device flag (and the index of the first bad forward into an on-device counter); the flag is read where the
    Trainer reads the loss anyway, at every logging step, and before every checkpoint, so a NaN never reaches a
    checkpoint and the run stops within ``logging_steps`` steps of it.
    """

    def __init__(
        self, model, eval_info: dict[str, dict], output_dir: Path, grad_accum: int = 1, key: str | None = None
    ):
        self.model = model
        self.eval_info = eval_info
        self.output_dir = Path(output_dir)
        self.grad_accum = max(1, int(grad_accum))
        self.key = key
        """The run's key, written into every checkpoint's completeness marker: a run resumes only its own."""
        self.start_step = 0
        self._forwards = self._first_bad = None
        self.handle = model.register_forward_hook(self._check_loss)

    def _check_loss(self, module, args, output):
        loss = getattr(output, "loss", None)
        if module.training and loss is not None:
            self.observe(loss)

    def observe(self, loss) -> None:
        """Fold one training loss into the on-device flag (what the forward hook does with a model's own loss; a
        run whose loss is computed outside the model's forward, e.g. distillation, calls it)."""
        if self._forwards is None:
            self._forwards = torch.zeros((), dtype=torch.long, device=loss.device)
            self._first_bad = torch.full((), -1, dtype=torch.long, device=loss.device)
        self._forwards += 1
        bad = ~torch.isfinite(loss.detach()).all()
        self._first_bad = torch.where(bad & (self._first_bad < 0), self._forwards, self._first_bad)

    def _raise_if_bad(self) -> None:
        if self._first_bad is None or int(self._first_bad) < 0:  # the one read of the flag: a sync
            return
        step = self.start_step + (int(self._first_bad) - 1) // self.grad_accum + 1
        ck = latest_checkpoint(self.output_dir, key=self.key)
        raise NonFiniteLossError(
            f"training loss is nan/inf at step {step}: the run is stopped, nothing after it was saved. Last good "
            f"checkpoint: {ck or 'none yet'}. Lower train.lr, raise train.warmup_steps or check the data; resume "
            "from the checkpoint with train.resume: true."
        )

    def on_train_begin(self, args, state, control, **kw):
        from .lora import check_not_repacked

        check_not_repacked(self.model)
        self.start_step = state.global_step

    def on_step_end(self, args, state, control, **kw):
        if control.should_log or control.should_save or control.should_training_stop:
            self._raise_if_bad()
        if control.should_save:
            bad = [n for n, p in self.model.named_parameters() if not torch.isfinite(p.detach()).all()]
            if bad:
                control.should_save = False
                raise NonFiniteLossError(
                    f"weights became non-finite at step {state.global_step} ({bad[:3]}...); "
                    f"not saved. Last good checkpoint: {latest_checkpoint(self.output_dir, key=self.key)}"
                )

    def on_evaluate(self, args, state, control, metrics=None, **kw):
        from .lora import check_not_repacked

        check_not_repacked(self.model)
        if metrics is None:
            return
        extra = {}
        for name, info in self.eval_info.items():
            loss = metrics.get(f"eval_{name}_loss")
            if loss is None:
                continue
            extra[f"eval_{name}_ppl"] = math.exp(min(loss, 50.0))
            extra[f"eval_{name}_bpb"] = loss * info["predicted_tokens"] / math.log(2) / info["bytes"]
        metrics.update(extra)
        if state.log_history and any(k.startswith("eval_") for k in state.log_history[-1]):
            state.log_history[-1].update(extra)

    def on_save(self, args, state, control, **kw):
        if args.should_save:
            ck = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if ck.is_dir():
                atomic_write_json(ck / COMPLETE, {"step": state.global_step, "time": time.time(), "key": self.key})

    def on_train_end(self, args, state, control, **kw):
        self.handle.remove()


class StopOnSignalCallback(_trainer_callback_base()):
    """SIGTERM (a spot instance's interruption notice, a cluster's preemption): the current step finishes, a
    complete checkpoint is written at once, and training stops; :func:`run_training` then returns an
    ``interrupted`` result without the final evaluation, so the process exits within the notice period and a
    restart resumes from that checkpoint.

    Several processes agree on the stop step. Each rank's handler only sets its own flag, and the signal can reach
    the ranks on different steps (a launcher that signals its workers one after the other, a signal sent to one
    process only); a rank that stopped alone would enter the checkpoint's collectives while the others train on,
    and the job would hang. So under ``torch.distributed`` the flag is read, as an all-reduce (MAX) of one number on
    the Trainer's device (gloo on CPU, NCCL on a GPU), only at the steps where every rank syncs anyway: logging
    steps, evaluations, checkpoints and the last step (the Trainer sets those flags from the step count, the same on
    every rank, before this callback runs). Every rank gets the same answer at the same step, so all of them save
    and stop there; reading the result on a GPU is a host-device sync, at a step that has one anyway. Never a
    collective per step: the price is latency, a signal is acted on at the next such step, up to
    ``logging_steps - 1`` steps later (keep ``logging_steps`` x step time + one checkpoint's write within the
    notice period). One process reads its flag at every step, with no collective.

    ``received``: the signal this rank caught; ``stopped``: the signal training stopped on, the same on every rank
    (what :func:`run_training` acts on, so no rank runs the final evaluation's collectives alone). A signal caught
    after the last check, past the last step, stops nothing: the run ends as usual.
    """

    def __init__(self, signals: tuple = (signal.SIGTERM,)):
        self.signals, self.received, self.stopped, self._old = signals, None, None, {}

    def _handler(self, signum, frame):
        self.received = signal.Signals(signum).name

    def on_train_begin(self, args, state, control, **kw):
        for s in self.signals:
            try:
                self._old[s] = signal.signal(s, self._handler)
            except ValueError:  # not the main thread: the caller handles signals
                pass

    def _agreed(self, args, control) -> str | None:
        """The signal to stop on at this step: the local flag, or under several processes the flag of any rank
        (the largest signal number), read at syncing steps only (see the class docstring)."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return self.received
        if not (control.should_log or control.should_evaluate or control.should_save or control.should_training_stop):
            return None
        flag = torch.tensor([signal.Signals[self.received].value if self.received else 0], device=args.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return signal.Signals(int(flag)).name if int(flag) else None

    def on_step_end(self, args, state, control, **kw):
        self.stopped = self._agreed(args, control)
        if self.stopped:
            control.should_save = True
            control.should_training_stop = True

    def on_train_end(self, args, state, control, **kw):
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old = {}


class RowsFirstCallback(_trainer_callback_base()):
    """Two-stage adapter schedule: for the first ``n_steps`` optimizer steps only the trainable token rows (peft's
    ``trainable_tokens`` / ``modules_to_save``) are updated: LoRA's gradients are dropped before the optimizer
    step, so AdamW leaves those matrices (and their states) untouched; after that everything trains."""

    def __init__(self, n_steps: int):
        self.n_steps = int(n_steps)

    def on_pre_optimizer_step(self, args, state, control, model=None, **kw):
        if state.global_step < self.n_steps and model is not None:
            for name, p in model.named_parameters():
                if "lora_" in name:
                    p.grad = None


class ProgressBarCallback(_trainer_callback_base()):
    """A progress bar of the optimizer steps on :func:`azllm.utils.progress` (the terminal or the run's log),
    with the last logged loss; the Trainer's own bars and log printing are switched off."""

    def __init__(self):
        self.bar = None

    def on_train_begin(self, args, state, control, **kw):
        if state.is_world_process_zero:
            self.bar = progress(total=state.max_steps, initial=state.global_step, desc="training", unit="step")

    def on_step_end(self, args, state, control, **kw):
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args, state, control, logs=None, **kw):
        if self.bar is not None and logs and "loss" in logs:
            self.bar.set_postfix(loss=f"{logs['loss']:.3f}")

    def on_train_end(self, args, state, control, **kw):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def latest_checkpoint(output_dir: str | os.PathLike, *, key: str | None = None) -> Path | None:
    """The newest complete checkpoint (``checkpoint-N`` holding ``azllm_complete.json``) of a run, or None. With
    ``key``, only a checkpoint whose marker names that run key counts: a folder that holds another run's checkpoints
    (the same name, other data or settings) is trained afresh, never resumed from what another run learned."""
    d = Path(output_dir)
    cks = [
        p for p in d.glob("checkpoint-*") if p.is_dir() and (p / COMPLETE).is_file() and p.name.split("-")[-1].isdigit()
    ]
    if key is not None:
        cks = [p for p in cks if _marker(p).get("key") == key]
    return max(cks, key=lambda p: int(p.name.split("-")[-1])) if cks else None


def _marker(ck: Path) -> dict:
    import json

    try:
        return json.loads((ck / COMPLETE).read_text())
    except (OSError, ValueError):
        return {}
