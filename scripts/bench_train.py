"""Side-by-side throughput and peak memory of full training, LoRA and QLoRA on one model (default: the params'
model, e.g. the tiny preset), each run in its own process, methods interleaved over several rounds.

    AZLLM_DATA_ROOT=/work/shared python scripts/bench_train.py params/default.yaml --rounds 3 --steps 25

Prints, per method: median tokens/s and step time over the rounds (the first ``train.timing_warmup_steps`` steps
of each run left out), the largest peak RSS (Linux VmHWM of the run's process since training began; CUDA max
allocated/reserved on a GPU), and the ratios to full training. Writes the table to
``artifacts/<run_name>/bench_train.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    from azllm.config import artifacts_dir, load_params
    from azllm.train import prepare_data
    from azllm.utils import atomic_write_json, machine_info

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("params")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--methods", nargs="+", default=["full", "lora", "qlora"])
    ap.add_argument("--base", help="start every method from this model folder (default: random init)")
    a = ap.parse_args()
    P = load_params(a.params)
    prepare_data(P, progress=False)  # once, so that no timed child encodes anything
    runs: dict[str, list[dict]] = {m: [] for m in a.methods}
    env = {**os.environ, "TQDM_DISABLE": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory(prefix="azllm-bench-") as tmp:
        for r in range(a.rounds):
            for m in a.methods:
                cmd = [sys.executable, "-m", "azllm.train", a.params, "--method", m, "--max-steps", str(a.steps),
                       "--output-dir", str(Path(tmp) / f"{m}-{r}")] + (["--base", a.base] if a.base else [])
                p = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if p.returncode != 0:
                    print(p.stderr[-3000:], file=sys.stderr)
                    return 1
                res = json.loads(Path(p.stdout.strip().splitlines()[-1]).read_text())
                runs[m].append(res)
                t = res["throughput"]
                print(f"round {r} {m:6s} tokens/s {t['tokens_per_s']:9.1f}  step {t['step_time_s']:.4f} s  "
                      f"peak RSS {t['peak_rss_mb']:.0f} MiB", flush=True)
    rows = []
    for m, rs in runs.items():
        t = [x["throughput"] for x in rs]
        row = {"method": m, "trainable": rs[0]["parameters"]["trainable"], "total": rs[0]["parameters"]["total"],
               "tokens_per_s": statistics.median(x["tokens_per_s"] for x in t),
               "step_time_s": statistics.median(x["step_time_s"] for x in t),
               "peak_rss_mb": max(x["peak_rss_mb"] for x in t)}
        if "cuda_max_allocated_mb" in t[0]:
            row["cuda_max_allocated_mb"] = max(x["cuda_max_allocated_mb"] for x in t)
            row["cuda_max_reserved_mb"] = max(x["cuda_max_reserved_mb"] for x in t)
        rows.append(row)
    full = next((r for r in rows if r["method"] == "full"), None)
    print(f"\n{'method':8s}{'trainable':>11s}{'tokens/s':>11s}{'step s':>9s}{'peak RSS MiB':>14s}"
          f"{'speed/full':>12s}{'mem/full':>10s}")
    for r in rows:
        sp = r["tokens_per_s"] / full["tokens_per_s"] if full else float("nan")
        mem = r["peak_rss_mb"] / full["peak_rss_mb"] if full else float("nan")
        r["speed_vs_full"], r["memory_vs_full"] = sp, mem
        print(f"{r['method']:8s}{r['trainable']:>11d}{r['tokens_per_s']:>11.1f}{r['step_time_s']:>9.4f}"
              f"{r['peak_rss_mb']:>14.0f}{sp:>12.2f}{mem:>10.2f}")
    out = artifacts_dir(P) / "bench_train.json"
    atomic_write_json(out, {"rows": rows, "rounds": a.rounds, "steps": a.steps, "machine": machine_info(),
                            "model": P["model"], "train": P["train"]})
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
