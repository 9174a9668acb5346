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
    sweep SWEEP_FILE [--record FILE]                             one stage's settings varied, judged on the selection
                                                                 split, one chosen by a stated rule (params/sweeps/)
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
    results RUN_FOLDER [--record FILE] [--headline]              a run's results tables as Markdown (the README's)
    results RUN_FOLDER --same-as RECORD [--tolerance X]          whether the run reproduces a record's results
    publish RUN_OR_EXPORT [--repo OWNER/NAME] [--dry-run] [--public] [--gguf same|separate|none] [--dataset]
                                                                 the run's last model (or corpus) on the Hugging Face
                                                                 Hub with a card of its measured results
    lock-env                                                     write environment.yml from requirements.lock

Each command is a thin call of a recipe (:mod:`azllm.recipes`) or of the report runner (:mod:`azllm.report`); a bad
params file exits 2 with the key's dotted name.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .assemble import METHODS
from .cli_bench import bench, bench_parsers
from .utils import REPO_ROOT

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
    sw = sub.add_parser("sweep", help="one stage's settings varied on a params file, judged on the selection split")
    sw.add_argument("sweep_file", help="a sweep file (params/sweeps/*.yaml)")
    sw.add_argument("--record", help="write the sweep's record there (docs/*.json; azllm results renders it)")
    rs = sub.add_parser("results", help="a run's results tables as Markdown, from its metrics.json or a record")
    rs.add_argument("run", help="a run folder (reports/<run>), its metrics.json, or a record (docs/smollm2_long.json)")
    rs.add_argument("--record", help="also write the record: what the tables read, with the run's commit and machine")
    rs.add_argument(
        "--headline",
        action="store_true",
        help="only the README's block: the pages' time and the last model against the original",
    )
    rs.add_argument(
        "--same-as",
        metavar="RECORD",
        help="instead of the tables, whether every result of RECORD is the run's too (wall times, speeds, memory "
        "and paths aside); exit 1 with each difference if not",
    )
    rs.add_argument("--tolerance", type=float, default=1e-6, help="relative tolerance of --same-as (default 1e-6)")
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
    bench_parsers(sub.add_parser("bench", help="measurements: encoder, methods, overhead, gpu, eval, sft, scale"))
    sub.add_parser("lock-env", help="write environment.yml from requirements.lock")
    return ap


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
        "sweep": _sweep,
        "results": _results,
        "publish": _publish,
        "distill": _distill,
        "deploy": _deploy,
        "launch": _launch,
        "bench": bench,
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
    except BrokenPipeError:
        if args.cmd != "results":  # a long run's pipe is not its reader's choice: that one is an error
            raise
        # `azllm results ... | head`: the reader took what it wanted and closed the pipe; what is still buffered
        # goes to the null device, so the exit's flush raises nothing (the advice in Python's `signal` docs)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    finally:
        if "torch.distributed" in sys.modules:  # under torchrun (train, sft, prefer): the group goes first
            from .lifecycle import end_distributed

            end_distributed()


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
            data_root=str(Paths.of(cfg).data_root) if Paths.of(cfg).data_root else None,
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
    """``results``: :func:`azllm.results.markdown` of a run's record (:func:`azllm.record.read_record`), or with
    ``--headline`` its :func:`azllm.results.headline` (the README's block); ``--record`` writes the record (before
    any output). A reader that closes the pipe early (``| head``) ends it with status 1, quietly (:func:`main`)."""
    from .record import read_record
    from .results import headline, markdown
    from .utils import atomic_write_json

    try:
        rec = read_record(args.run)
    except (OSError, ValueError, KeyError) as e:
        print(f"azllm: {args.run}: not a run folder, metrics.json or record ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    if args.record:
        atomic_write_json(args.record, rec)
    if args.same_as:
        return _same_as(rec, args.run, args.same_as, args.tolerance)
    print((headline if args.headline else markdown)(rec), end="")
    return 0


def _same_as(rec: dict, name: str, reference: str, tolerance: float) -> int:
    """``results --same-as``: :func:`azllm.record.differences` of ``rec`` against the record ``reference``, printed;
    0 when there are none."""
    from .record import differences, measures, read_record

    ref = read_record(reference)
    diffs = differences(rec, ref, rel_tol=tolerance)
    n, added = len(measures(ref)), len(measures(rec).keys() - measures(ref).keys())
    print(
        f"{name} against {reference}: {n - len(diffs):,} of {n:,} results the same within {tolerance:g} (wall times, "
        f"speeds, memory and paths aside); {added:,} only in {name} (fields the record gained since)"
    )
    a, b = ((r.get("run") or {}).get("machine") or {} for r in (rec, ref))
    named = [k for k in ("processor", "cpu", "platform") if k in a and k in b]
    if not named or any(a[k] != b[k] for k in named):
        print("  not the same machine (or a record does not say): floats may differ in their last digits")
    for k, got, want in diffs:
        print(f"  {k}: {got!r} (reference {want!r})")
    return 1 if diffs else 0


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


def _sweep(args) -> int:
    """``sweep``: :func:`azllm.recipes.sweep.sweep_command`; prints the chosen variant."""
    from .recipes.sweep import sweep_command

    r = sweep_command(args.sweep_file, record=args.record)
    print(r["chosen"] or "none: no variant met the rule")
    return 0


def _publish_at_job_end(cfg, stage: str, record: dict) -> None:
    """Inside a SageMaker job whose params set ``publish.repo``: publish the job's export on rank 0
    (:func:`azllm.recipes.publish.publish_job`); a refusal fails the job after its model is saved."""
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


if __name__ == "__main__":
    from .utils import exit_now

    exit_now(main())
