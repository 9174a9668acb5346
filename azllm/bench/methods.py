"""Full training vs LoRA vs QLoRA on one model, each run in its own fresh process, side by side.

:func:`compare_methods` trains each method from the same ``base`` for the same steps through
:func:`azllm.run.train_method` in a fresh process (:func:`azllm.bench.process.run_fresh`), so that each run's peak
memory is its own; runs already finished with the same inputs are reused. Notebook 03 shows one round.

Command line, several interleaved rounds with medians and ratios to full training::

    python -m azllm.bench.methods params/default.yaml --rounds 3 --steps 25
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from .process import ok_or_raise, run_fresh

__all__ = ["compare_methods", "method_medians"]


def compare_methods(params: dict, methods: list[str], *, base: str | None, max_steps: int, lr: float,
                    output_dirs: list[str | None] | None = None, timeout_s: float = 3600) -> list[dict]:
    """Train each method from ``base`` (None: random init) for ``max_steps`` at ``lr``, each in a fresh process.

    ``params``: the run's config as a dict (``Config.to_dict()``). Returns the results dicts, in order.
    """
    rows = []
    for i, m in enumerate(methods):
        job = {"params": params, "method": m, "base": str(base) if base else None, "max_steps": int(max_steps),
               "lr": float(lr), "output_dir": (output_dirs or [None] * len(methods))[i]}
        rows.append(ok_or_raise(run_fresh("azllm.run:train_method", job, timeout_s=timeout_s,
                                          env={"TQDM_DISABLE": "1"}), f"{m} run"))
    return rows


def method_medians(runs: dict[str, list[dict]]) -> list[dict]:
    """One row per method over its rounds: median tokens/s and step time, largest peak memory, ratios to full."""
    rows = []
    for m, rs in runs.items():
        t = [x["throughput"] for x in rs]
        row = {"method": m, "rounds": len(rs), "trainable": rs[0]["parameters"]["trainable"],
               "tokens_per_s": statistics.median(x["tokens_per_s"] for x in t),
               "step_time_s": statistics.median(x["step_time_s"] for x in t),
               "peak_rss_mb": max(x["peak_rss_mb"] for x in t)}
        if "cuda_max_allocated_mb" in t[0]:
            row["cuda_max_allocated_mb"] = max(x["cuda_max_allocated_mb"] for x in t)
        rows.append(row)
    full = next((r for r in rows if r["method"] == "full"), None)
    for r in rows:
        r["speed_vs_full"] = r["tokens_per_s"] / full["tokens_per_s"] if full else None
        r["memory_vs_full"] = r["peak_rss_mb"] / full["peak_rss_mb"] if full else None
    return rows


def main(argv: list[str] | None = None) -> int:
    from .. import run
    from ..utils import atomic_write_json, machine_info

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("params")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--methods", nargs="+", default=["full", "lora", "qlora"])
    ap.add_argument("--base", help="start every method from this model folder (default: random init)")
    a = ap.parse_args(argv)
    cfg = run.load(a.params)
    run.prepare_data(cfg, progress=False)  # once, so that no timed process encodes anything
    runs: dict[str, list[dict]] = {m: [] for m in a.methods}
    with tempfile.TemporaryDirectory(prefix="azllm-methods-") as tmp:
        for r in range(a.rounds):
            outs = [str(Path(tmp) / f"{m}-{r}") for m in a.methods]
            for m, res in zip(a.methods, compare_methods(cfg.to_dict(), a.methods, base=a.base, max_steps=a.steps,
                                                         lr=cfg.train.lr, output_dirs=outs)):
                runs[m].append(res)
                t = res["throughput"]
                print(f"round {r} {m:6s} tokens/s {t['tokens_per_s']:9.1f}  step {t['step_time_s']:.4f} s  "
                      f"peak RSS {t['peak_rss_mb']:.0f} MiB", flush=True)
    rows = method_medians(runs)
    for row in rows:
        print("  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
    out = run.artifacts_dir(cfg) / "bench_methods.json"
    atomic_write_json(out, {"rows": rows, "rounds": a.rounds, "steps": a.steps, "machine": machine_info()})
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
