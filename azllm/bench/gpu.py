"""One command for the GPU benchmark: ``python -m azllm.bench.gpu`` (``make bench-gpu``).

Runs notebook ``04_benchmark`` with ``params/gpu.yaml`` through :func:`azllm.report.run_report` (a
Llama-3.2-1B-shaped model with random weights, seq 2048, bf16: baseline vs Liger vs LoRA vs QLoRA, each with
gradient checkpointing off and on, every variant in its own process) and writes the report to
``reports/gpu/`` (``index.html``, ``04_benchmark.html``, ``metrics.json``), then prints the measured table.

``--dry-run`` runs the very same path on CPU with a tiny shape (the test suite runs it): same variants, same
notebook, same report, only the model shape, device, vocabulary and step counts are overridden.

    python -m azllm.bench.gpu                 # on a machine with one CUDA GPU, < 8 minutes
    python -m azllm.bench.gpu --dry-run       # anywhere, ~1-2 minutes on 2 CPU cores
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

from ..config import ParamsError, deep_update, load_params
from ..report import run_report
from ..utils import REPO_ROOT as ROOT

DRY_RUN = {
    "run_name": "gpu-dry-run",
    "benchmark": {
        "preset": "tiny",
        "model": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "num_key_value_heads": 2},
        "vocab_size": 512, "seq_len": 64, "batch_size": 2, "untimed_steps": 2, "steps": 1, "windows": 1,
        "device": "cpu", "threads": 1, "timeout_s": 120,
        "fit": {"seq_lens": [1024, 2048, 4096], "budgets_gb": [24, 80]},
    },
}


def markdown_table(metrics: dict) -> str:
    """The measured table of the run (from its metrics.json) as Markdown, for a closing note."""
    rows = metrics["metrics"]["benchmark"]["variants"]
    pred = {r["variant"]: r for r in metrics["metrics"]["benchmark"]["predicted_vs_measured"]}

    def f(x, fmt="{:.0f}"):
        return "–" if x is None else fmt.format(x)

    out = ["| variant | status | tokens/s (min–max) | speed × | step ms | peak MiB (min–max) | memory × | "
           "predicted MiB | loss first → last |", "|" + "---|" * 9]
    for r in rows:
        p = pred.get(r["variant"], {})
        out.append(
            f"| {r['variant']} | {r['status'] if r['status'] == 'ok' else r['status'] + ': ' + (r['note'] or '')[:80]} "
            f"| {f(r['tokens/s'])} ({f(r['tokens/s min'])}–{f(r['tokens/s max'])}) | {f(r.get('speed ×'), '{:.2f}')} "
            f"| {f(r['step ms'])} | {f(r['peak MB'])} ({f(r['peak MB min'])}–{f(r['peak MB max'])}) "
            f"| {f(r.get('memory ×'), '{:.2f}')} | {f(p.get('predicted MB'))} "
            f"| {f(r['loss first'], '{:.3f}')} → {f(r['loss last'], '{:.3f}')} |")
    return "\n".join(out)


def job_cost_lines(metrics: dict) -> str:
    """The whole-job estimate of the run (``benchmark.job``), one line per variant, for a closing note."""
    b = metrics["metrics"]["benchmark"]
    job = b.get("job") or {}
    out = [f"job: {job.get('tokens', 0):.3g} tokens on {job.get('instances')} x {job.get('instance')}"]
    for r in b.get("job_cost") or []:
        out.append(f"  {r['variant']:12s} {r['hours']:8.1f} h  on-demand ${r['on-demand $']:,.0f}  "
                   f"spot ${r['spot $']:,.0f}  checkpoints ${r['storage $']:.2f}  ({r['tokens/s source']})")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default=str(ROOT / "params" / "gpu.yaml"))
    ap.add_argument("--reports", default=str(ROOT / "reports"))
    ap.add_argument("--dry-run", action="store_true", help="same path on CPU with a tiny shape")
    args = ap.parse_args(argv)

    raw = yaml.safe_load(Path(args.params).read_text(encoding="utf-8")) or {}
    if args.dry_run:
        raw = deep_update(raw, json.loads(json.dumps(DRY_RUN)))
    else:
        import torch

        if not torch.cuda.is_available():
            print("bench_gpu: no CUDA device here. Run it on a machine with one GPU, or use --dry-run to check the "
                  "same path on CPU with a tiny shape.", file=sys.stderr)
            return 2
    reports = Path(args.reports)
    reports.mkdir(parents=True, exist_ok=True)
    params_path = reports / str(raw.get("run_name", "gpu")) / "bench_gpu.params.yaml"  # in the git-ignored run dir
    params_path.parent.mkdir(parents=True, exist_ok=True)
    params_path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
    try:
        load_params(params_path)
    except ParamsError as e:
        print(f"bench_gpu: bad params: {e}", file=sys.stderr)
        return 2
    t0 = time.time()
    run_dir, ok = run_report(params_path, reports_dir=reports, notebooks=["04_benchmark"])
    took = time.time() - t0
    metrics = json.loads((run_dir / "metrics.json").read_text())
    if ok:
        print(markdown_table(metrics))
        print(job_cost_lines(metrics))
    print(f"bench_gpu: {'done' if ok else 'FAILED'} in {took / 60:.1f} min; report: {run_dir / 'index.html'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
