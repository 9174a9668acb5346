"""What azllm's training path costs on top of the training itself: :func:`azllm.train.run_training` (the HF Trainer
with azllm's callbacks) side by side with a bare nanoGPT-style loop on the same model, batches and optimizer.

``python -m azllm.bench.overhead PARAMS [--rounds N] [--steps N] [--threads N]`` prints the medians and the ratio
for the run's model, batch and token files. Decisions:

- **The same work**: both paths build the same model from the same seed, read windows of ``block_size`` tokens
  of the run's token file (the bare loop through :class:`azllm.tokens.TokenWindowDataset` and a seeded
  permutation, stacked by hand), run AdamW from :func:`azllm.lora.make_optimizer` with the same warm-up + cosine
  schedule, clip the gradient norm and read the loss every ``logging_steps`` steps (``loss.item()``, as nanoGPT
  logs). What the training path adds is the Trainer's loop, its data loader and collation, azllm's callbacks
  (throughput, non-finite loss flag, SIGTERM, progress) and the experiment tracker.
- **Tokens/s**: both paths time the interval from one optimizer step's end to the next (the training path through
  :class:`azllm.callbacks.ThroughputCallback`, its own number), after ``untimed_steps``; no evaluation or
  checkpoint falls inside the timed steps (the training path's final evaluation and save come after them).
- **One allocator setting for both**: on CPU the training path keeps freed memory in the process
  (:func:`azllm.train.keep_freed_memory`); each process applies it before either path runs, so the ratio is the cost
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
import sys
import tempfile
import time
from pathlib import Path

from ..utils import progress
from .process import ok_or_raise, run_fresh

__all__ = ["bare_loop", "trainer_path", "measure", "compare", "main", "TRAIN_DEFAULTS"]

# the training arguments of both paths unless the caller gives others (the tiny preset at the default batch)
TRAIN_DEFAULTS = {"block_size": 128, "batch_size": 8, "max_steps": 60, "lr": 3e-3, "min_lr_ratio": 0.1,
                  "warmup_steps": 10, "weight_decay": 0.1, "betas": [0.9, 0.95], "grad_clip": 1.0,
                  "logging_steps": 10, "untimed_steps": 5, "seed": 1234}


def _model(preset: str, model: dict, vocab_size: int, seed: int):
    from ..model import build_model, model_config

    return build_model(model_config(preset, vocab_size, **(model or {})), seed=seed)


def bare_loop(model, *, train_file, block_size: int, batch_size: int, max_steps: int, lr: float,
              min_lr_ratio: float, warmup_steps: int, weight_decay: float, betas, grad_clip: float,
              logging_steps: int, untimed_steps: int, seed: int) -> dict:
    """The nanoGPT-style loop: ``{"tokens_per_s", "step_times", "losses", "timed_steps"}`` (``losses``: the loss
    read at every logging step)."""
    import torch
    from transformers import get_scheduler

    from ..lora import make_optimizer
    from ..tokens import TokenWindowDataset

    ds = TokenWindowDataset(train_file, block_size)
    g = torch.Generator().manual_seed(seed)
    order = torch.cat([torch.randperm(len(ds), generator=g) for _ in range(-(-max_steps * batch_size // len(ds)))])
    opt = make_optimizer(model, "adamw", lr=lr, weight_decay=weight_decay, betas=tuple(betas))
    sched = get_scheduler("cosine_with_min_lr", opt, num_warmup_steps=warmup_steps, num_training_steps=max_steps,
                          scheduler_specific_kwargs={"min_lr_rate": float(min_lr_ratio)})
    model.train()
    times, losses, last = [], [], time.perf_counter()
    for step in range(max_steps):
        x = torch.stack([ds[int(i)]["input_ids"] for i in order[step * batch_size:(step + 1) * batch_size]])
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if (step + 1) % logging_steps == 0:
            losses.append(loss.item())
        now = time.perf_counter()
        if step >= untimed_steps:
            times.append(now - last)
        last = now
    return {"tokens_per_s": batch_size * block_size * len(times) / sum(times), "step_times": times,
            "losses": losses, "timed_steps": len(times)}


def trainer_path(model, *, tokenizer, train_file, val_file, output_dir, block_size: int, batch_size: int,
                 max_steps: int, lr: float, min_lr_ratio: float, warmup_steps: int, weight_decay: float, betas,
                 grad_clip: float, logging_steps: int, untimed_steps: int, seed: int,
                 report_to: tuple = ("tensorboard",)) -> dict:
    """:func:`azllm.train.run_training` with no evaluation or checkpoint before the last step:
    ``{"tokens_per_s", "step_times", "losses", "timed_steps"}`` as :func:`bare_loop`."""
    from ..train import run_training

    r = run_training(model, tokenizer=tokenizer, train_file=train_file, eval_files={"val": val_file},
                     output_dir=output_dir, key="overhead", block_size=block_size, batch_size=batch_size,
                     grad_accum=1, max_steps=max_steps, lr=lr, min_lr_ratio=min_lr_ratio, warmup_steps=warmup_steps,
                     weight_decay=weight_decay, betas=betas, grad_clip=grad_clip, optimizer="adamw",
                     precision="fp32", gradient_checkpointing=False, eval_steps=max_steps + 1,
                     eval_max_tokens=block_size * 4, eval_batch_size=4, logging_steps=logging_steps,
                     save_steps=max_steps + 1, save_total_limit=1, resume=False, untimed_steps=untimed_steps,
                     seed=seed, report_to=tuple(report_to), progress=True)
    cb = next(c for c in r["trainer"].callback_handler.callbacks if type(c).__name__ == "ThroughputCallback")
    return {"tokens_per_s": r["throughput"]["tokens_per_s"], "step_times": cb.step_times,
            "losses": [h["loss"] for h in r["curves"]["train"]], "timed_steps": r["throughput"]["timed_steps"]}


def measure(job: dict) -> dict:
    """Fresh-process entry: both paths in this process, in ``job["order"]``, under the allocator setting the
    training path makes on CPU (:func:`azllm.train.keep_freed_memory`, applied first, so that both paths run
    under it). ``job``: ``tokenizer`` (a folder), ``train_file``, ``val_file``, ``preset``, ``model`` (LlamaConfig
    overrides), ``train`` (arguments of :func:`bare_loop` over :data:`TRAIN_DEFAULTS`), ``threads``, ``workdir``,
    ``order`` (``["bare", "trainer"]`` or reversed), ``report_to``."""
    import torch

    from ..tokenizer import load_tokenizer
    from ..train import keep_freed_memory

    if job.get("threads"):
        torch.set_num_threads(int(job["threads"]))
    kept = keep_freed_memory() if not torch.cuda.is_available() else False
    tok = load_tokenizer(job["tokenizer"])
    t = {**TRAIN_DEFAULTS, **job.get("train", {})}
    out: dict = {"threads": torch.get_num_threads(), "freed_memory_kept": kept, "load_start": os.getloadavg()[0]}
    for path in job["order"]:
        model = _model(job["preset"], job.get("model", {}), tok.vocab_size, t["seed"])
        if path == "bare":
            r = bare_loop(model, train_file=job["train_file"], **t)
        else:
            with tempfile.TemporaryDirectory(dir=job.get("workdir")) as td:
                r = trainer_path(model, tokenizer=tok, train_file=job["train_file"], val_file=job["val_file"],
                                 output_dir=Path(td) / "run", report_to=tuple(job.get("report_to", ())), **t)
        out[path] = {k: v for k, v in r.items() if k != "step_times"}
        out[path]["step_s"] = statistics.median(r["step_times"])
    out["load_end"] = os.getloadavg()[0]
    return out


def compare(*, tokenizer: str | os.PathLike, train_file: str | os.PathLike, val_file: str | os.PathLike,
            preset: str = "tiny", model: dict | None = None, train: dict | None = None, rounds: int = 3,
            threads: int = 1, report_to: tuple = ("tensorboard",), timeout_s: float = 900,
            show_progress: bool = True) -> dict:
    """The bare loop and the training path side by side in ``rounds`` fresh processes (:func:`measure`), the order
    flipped every round. Returns ``{"rows": [{"round", "order", "bare", "trainer", "ratio", "load"}], "bare",
    "trainer" (median tokens/s), "ratio" (of the medians), "ratio_min", "ratio_max", "steps", "tokens_per_step",
    "threads", "freed_memory_kept"}``."""
    t = {**TRAIN_DEFAULTS, **(train or {})}
    rows, bar = [], progress(total=rounds, desc="overhead", disable=not show_progress)
    with tempfile.TemporaryDirectory(prefix="azllm-overhead-") as work:
        for k in range(rounds):
            order = ["bare", "trainer"] if k % 2 == 0 else ["trainer", "bare"]
            job = {"tokenizer": str(tokenizer), "train_file": str(train_file), "val_file": str(val_file),
                   "preset": preset, "model": dict(model or {}), "train": t, "threads": threads, "workdir": work,
                   "order": order, "report_to": list(report_to)}
            r = ok_or_raise(run_fresh("azllm.bench.overhead:measure", job, timeout_s=timeout_s), f"round {k + 1}")
            rows.append({"round": k + 1, "order": " then ".join(order), "bare": r["bare"]["tokens_per_s"],
                         "trainer": r["trainer"]["tokens_per_s"],
                         "ratio": r["trainer"]["tokens_per_s"] / r["bare"]["tokens_per_s"],
                         "bare step ms": 1000 * r["bare"]["step_s"], "trainer step ms": 1000 * r["trainer"]["step_s"],
                         "load": round(r["load_end"], 2), "freed_memory_kept": r["freed_memory_kept"]})
            bar.update(1)
    bar.close()
    bare, trainer = (statistics.median(r[p] for r in rows) for p in ("bare", "trainer"))
    return {"rows": rows, "bare": bare, "trainer": trainer, "ratio": trainer / bare,
            "ratio_min": min(r["ratio"] for r in rows), "ratio_max": max(r["ratio"] for r in rows),
            "steps": t["max_steps"], "untimed_steps": t["untimed_steps"],
            "tokens_per_step": t["batch_size"] * t["block_size"], "threads": threads, "preset": preset,
            "model": dict(model or {}), "freed_memory_kept": rows[0]["freed_memory_kept"]}


def main(argv: list[str] | None = None) -> int:
    """``python -m azllm.bench.overhead PARAMS``: the run's tokenizer, token files, model and batch (through the run
    layer), several rounds, the medians and the ratio; written to ``artifacts/<run>/bench_overhead.json``."""
    import argparse

    from .. import run
    from ..utils import atomic_write_json, machine_info

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("params")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=TRAIN_DEFAULTS["max_steps"])
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (0: torch's default)")
    a = ap.parse_args(argv)
    cfg = run.load(a.params)
    data = run.prepare_data(cfg, progress=False)  # once, so that no timed process encodes anything
    T = cfg.train
    train = {"block_size": T.block_size, "batch_size": T.batch_size, "lr": T.lr, "min_lr_ratio": T.min_lr_ratio,
             "warmup_steps": min(T.warmup_steps, a.steps // 4), "weight_decay": T.weight_decay, "betas": T.betas,
             "grad_clip": T.grad_clip, "logging_steps": T.logging_steps, "max_steps": a.steps, "seed": cfg.seed}
    res = compare(tokenizer=data["tokenizer"].path, train_file=data["train"], val_file=data["val"],
                  preset=cfg.model.preset, model=cfg.model.config, train=train, rounds=a.rounds, threads=a.threads,
                  report_to=tuple(T.report_to))
    for r in res["rows"]:
        print(f"round {r['round']} ({r['order']}): bare {r['bare']:8.0f} tokens/s, training path "
              f"{r['trainer']:8.0f} tokens/s, ratio {r['ratio']:.3f} (load {r['load']})")
    print(f"median over {a.rounds} rounds: bare {res['bare']:.0f} tokens/s, training path {res['trainer']:.0f} "
          f"tokens/s, ratio {res['ratio']:.3f} (per round {res['ratio_min']:.3f}-{res['ratio_max']:.3f})")
    out = run.artifacts_dir(cfg) / "bench_overhead.json"
    atomic_write_json(out, {**res, "machine": machine_info()})
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
