"""``azllm publish RUN_OR_EXPORT --repo OWNER/NAME``: a run's model (or its corpus) on the Hugging Face Hub, with a
card written from the run's record.

Reads ``publish``, ``deploy`` (GGUF files of a model that has none), and the sources of every stage that made the
model (``data.train`` and ``adapt.replay_source`` for adaptation, ``sft.sources``, ``preference.sources``) for the
licenses.

1. **What.** A run folder (``reports/<run>``, its ``metrics.json``) publishes the cycle's last model: the preference
   export, else the SFT export. An export folder publishes itself, with the record of the run whose artifacts name it
   (found under ``--reports``). ``--dataset`` publishes the run's corpus stage output instead.
2. **Refusals, before anything is staged or sent** (:mod:`azllm.publish`, :mod:`azllm.licenses`): a repository
   that is not ``owner/name``; an export that is not complete; an input whose license is missing or not
   redistributable (each named; training on it stays allowed); a model whose license is unknown; no token (a real
   upload only).
3. **Staging.** One folder per repository under ``artifacts/<run>/publish/<owner>__<name>/``: the model's weights,
   tokenizer, chat template and card; its GGUF files (converted and checked by :func:`azllm.recipes.deploy.
   deploy_model` when the run has none of this model) in the same repository or in ``<name>-GGUF``
   (``publish.gguf``). Every folder is complete before the first upload.
4. **Upload** (:func:`azllm.publish.upload`), private unless ``--public``; ``--dry-run`` stops after staging and
   prints what would be uploaded, and says when the upload would be refused.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TypedDict

from ..card import DatasetFacts, GGUFFile, ModelFacts, Score, StageFacts, dataset_card, model_card
from ..config import Config, SourceConfig
from ..licenses import KNOWN_BASES, DataInput, LicenseError, license_of, refusals
from ..publish import PublishError, Staged, check_repo_id, corpus_parquet, export_files, plan, require_token, stage
from ..publish import upload as upload_staged
from ..record import run_record, section
from .paths import Paths
from .sources import resolve

__all__ = [
    "PublishResult",
    "EXPORTS",
    "PAGES",
    "read_run",
    "run_config",
    "run_of_export",
    "model_of_run",
    "stage_chain",
    "training_inputs",
    "base_of",
    "model_scores",
    "stage_facts",
    "publish_model",
    "publish_job",
    "publish_dataset",
]

EXPORTS = {"preference_export": "preference", "sft_export": "sft"}
"""The exports a run's record names (``artifacts``), last stage first: what a run publishes."""

PAGES = {"adapt": "05_adapt", "sft": "07_sft", "preference": "09_preference"}
"""The page of each stage, whose wall time the card gives."""


class PublishResult(TypedDict):
    """What :func:`publish_model` and :func:`publish_dataset` did: the staged folders (repository, type, folder,
    visibility), the plan's lines, the refusals (empty when publishing is allowed), the commit URLs (empty for a dry
    run)."""

    staged: list[dict]
    plan: list[str]
    refused: list[str]
    uploaded: list[str]
    dry_run: bool


def read_run(path: str | os.PathLike) -> tuple[Path, dict]:
    """``(run folder, metrics.json)`` of a run folder or of its ``metrics.json``."""
    p = Path(path)
    file = p / "metrics.json" if p.is_dir() else p
    if not file.is_file() or file.name != "metrics.json":
        raise PublishError(f"{path}: not a run folder (no metrics.json); run `azllm run PARAMS` first")
    return file.parent, json.loads(file.read_text(encoding="utf-8"))


def run_config(doc: dict) -> Config:
    """The run's config as it ran (``run.params``), on the data root it ran with when its params named none."""
    params = doc["run"]["params"]
    root = doc["run"].get("data_root")
    if root and not (params.get("data") or {}).get("root"):
        params = {**params, "data": {**params.get("data", {}), "root": root}}
    return Config.model_validate(params)


def run_of_export(folder: str | os.PathLike, reports: str | os.PathLike = "reports") -> tuple[Path, dict, str]:
    """``(run folder, metrics.json, artifact name)`` of the run under ``reports`` whose artifacts name ``folder``."""
    want = Path(folder).resolve()
    for metrics in sorted(Path(reports).glob("*/metrics.json")):
        doc = json.loads(metrics.read_text(encoding="utf-8"))
        for name, path in (doc.get("artifacts") or {}).items():
            if Path(path).resolve() == want:
                return metrics.parent, doc, name
    raise PublishError(
        f"{folder}: no run under {reports}/ names this folder among its artifacts; publish the run folder "
        "(reports/<run>) or pass --reports where its report is"
    )


def model_of_run(doc: dict) -> tuple[str, Path]:
    """``(stage, export folder)``: the cycle's last model of a run (:data:`EXPORTS`)."""
    arts = doc.get("artifacts") or {}
    for name, stage_name in EXPORTS.items():
        if arts.get(name):
            return stage_name, Path(arts[name])
    raise PublishError(
        f"run {doc['run'].get('run_name')!r} has no SFT or preference export (artifacts: {sorted(arts)}); run "
        "notebook 07 or 09, or publish an export folder"
    )


def _stage_of_artifact(name: str) -> str:
    if name in EXPORTS:
        return EXPORTS[name]
    if name.startswith("adapt_export"):
        return "adapt"
    raise PublishError(f"artifact {name!r} is not a model export azllm publishes (an SFT, preference or adapt export)")


def stage_chain(cfg: Config, last: str) -> list[str]:
    """The stages that made the model of stage ``last``, in order: adaptation when SFT tuned this run's adapted model
    (``sft.base`` unset), SFT when preference tuning started from it (``preference.base`` unset).

    >>> from azllm.config import load_params
    >>> stage_chain(load_params(None), "preference"), stage_chain(load_params(None, {"sft": {"base": "x/y"}}), "sft")
    (['adapt', 'sft', 'preference'], ['sft'])
    """
    if last == "adapt":
        return ["adapt"]
    if last == "sft":
        return (["adapt"] if cfg.sft.base is None else []) + ["sft"]
    if last == "preference":
        return (stage_chain(cfg, "sft") if cfg.preference.base is None else []) + ["preference"]
    raise PublishError(f"unknown stage {last!r}")


def _sources(cfg: Config, stage_name: str) -> list[tuple[str, SourceConfig]]:
    if stage_name == "adapt":
        out = [("data.train", cfg.data.train)]
        return out + ([("adapt.replay_source", cfg.adapt.replay_source)] if cfg.adapt.replay else [])
    if stage_name == "sft":
        return [(f"sft.sources.{k}", v) for k, v in cfg.sft.sources.items()]
    built = [(f"sft.sources.{k}", cfg.sft.sources[k]) for k in cfg.preference.build_sources if k in cfg.sft.sources]
    return [(f"preference.sources.{k}", v) for k, v in cfg.preference.sources.items()] + (
        built if cfg.preference.build else []
    )


def training_inputs(cfg: Config, stages: list[str]) -> list[DataInput]:
    """Every input the ``stages`` trained on: each file a source matches (its path under the data root) or its hub
    dataset, with its license (:func:`azllm.licenses.license_of`)."""
    paths, out = Paths.of(cfg), []
    for st in stages:
        for name, src in _sources(cfg, st):
            r = resolve(cfg, src)
            places = [_under(f, paths.data_root) for f in r.files] if r.kind == "files" else [str(r.hub)]
            for where in places:
                lic = license_of(where, src.license)
                how = "params" if src.license else "azllm" if lic else "none"
                out.append(DataInput(stage=st, source=name, where=where, license=lic, license_from=how))
    return out


def _under(f: Path, root: Path | None) -> str:
    try:
        return Path(f).resolve().relative_to(root).as_posix() if root else str(f)
    except ValueError:
        return str(f)


def base_of(cfg: Config, stages: list[str]) -> tuple[str | None, str | None, str]:
    """``(Hub id, license, note)`` of the model the first of ``stages`` started from: ``publish.base_model`` /
    ``publish.license`` when given, else :data:`azllm.licenses.KNOWN_BASES`, else a Hub id as it is."""
    first = stages[0]
    named = {"adapt": cfg.adapt.base, "sft": cfg.sft.base, "preference": cfg.preference.base}[first]
    hub, lic = KNOWN_BASES.get(named or "", (None, None))
    note = f"`{named}` is {hub}." if hub and hub != named else ""
    if hub is None and named and "/" in named and not Path(named).exists() and not named.startswith("gguf:"):
        hub = named
    hub = cfg.publish.base_model or hub
    return hub, cfg.publish.license or lic, note


def _split(cfg: Config, task: str) -> str | None:
    local = cfg.evaluate.local.get(task)
    parts = set(Path(local.path).with_suffix("").parts) | {Path(local.path).stem} if local and local.path else set()
    return next((s for s in ("devtest", "test", "dev", "val", "validation", "train") if s in parts), None)


def _judgement_n(record: dict, measure: str) -> int | None:
    """The number of items behind a preference judgement row, for records written before the rows carried it: the
    measure's part of the record, else the count its name gives ("chrF++ (24 held-out answers)")."""
    parts = (("preference", "preference_accuracy"), ("chrF++", "chrf"), ("loop", "loops"), ("empty", "empty"))
    key = next((part for prefix, part in parts if measure.startswith(prefix)), None)
    if key and (record.get(key) or {}).get("n"):
        return record[key]["n"]
    m = re.search(r"\((\d+) held-out", measure)
    return int(m.group(1)) if m else None


def model_scores(cfg: Config, doc: dict, last: str) -> tuple[list[Score], str]:
    """The measures of the model of stage ``last`` as the run recorded them (each against the model before that
    stage, on the same items), with the original base's score beside where the run measured it; and what "before"
    is."""
    m = run_record(doc)
    base = {}
    for r in section(m, "evaluate").get("before_after") or []:
        base.setdefault(r["task"], r.get("before"))
    stages = section(m, "sft").get("stages") or []
    original_chrf = next((r for r in stages if r.get("model") == "original base"), None)
    if last == "preference":
        p = section(m, "preference")
        rows = [{"n": _judgement_n(p, r["measure"]), **r, "task": r["measure"]} for r in p.get("judgement") or []]
        before = "the SFT model"
        rows += list(p.get("tasks_before_after") or [])
    elif last == "sft":
        s = section(m, "sft")
        rows = [r for r in [s.get("chrf_before_after")] if r] + list(s.get("tasks_before_after") or [])
        before = "the model SFT started from"
    else:
        rows, before = list(section(m, "evaluate").get("before_after") or []), "the base"
    out = []
    for r in rows:
        task = r["task"]
        orig = base.get(task)
        if task.startswith("chrF") and original_chrf and original_chrf.get("n") == r.get("n", original_chrf.get("n")):
            orig = original_chrf["chrf"]
        keys = ("metric", "n", "chance", "before", "after", "after_se", "delta", "delta_se", "mde", "verdict")
        out.append(Score(task=task, **{k: r.get(k) for k in keys}, original=orig, split=_split(cfg, task)))
    return out, before


def _settings(cfg: Config, doc: dict, stage_name: str) -> str:
    m = run_record(doc)
    if stage_name == "adapt":
        runs = section(m, "adapt").get("runs") or []
        best = min(runs, key=lambda r: r["az_bpb_after"]) if runs else {}
        a = cfg.adapt
        lr = a.lr_lora if best.get("method") == "lora" else a.lr_full
        bpb = (
            f"; az bits per byte {best['az_bpb_before']:.3f} → {best['az_bpb_after']:.3f}, en "
            f"{best['en_bpb_before']:.3f} → {best['en_bpb_after']:.3f}"
            if best
            else ""
        )
        return (
            f"{best.get('way', '?')} / {best.get('method', '?')}, {a.steps} steps, lr {lr:g}, "
            f"{a.az_train_bytes or 0:,} bytes of Azerbaijani, {a.replay:.0%} English replay{bpb}"
        )
    if stage_name == "sft":
        s, main = cfg.sft, (section(m, "sft").get("main") or {})
        return (
            f"{s.method}, {main.get('steps', s.max_steps)} steps, lr {s.lr:g}, batch {s.batch_size} × "
            f"{s.grad_accum}, max length {s.max_length}"
        )
    p = cfg.preference
    rpo = f", plus {p.sft_weight:g} × the chosen answers' cross-entropy" if p.sft_weight else ""
    steps = section(m, "preference").get("steps", p.max_steps)
    return f"{p.method.upper()} ({p.train_method}), {steps} steps, lr {p.lr:g}, β {p.beta:g}{rpo}"


def stage_facts(cfg: Config, doc: dict, stages: list[str]) -> list[StageFacts]:
    """Each stage's key settings in words and its page's wall time (``notebooks``)."""
    pages = {n["name"]: n.get("seconds") for n in doc.get("notebooks") or []}
    return [StageFacts(stage=s, settings=_settings(cfg, doc, s), seconds=pages.get(PAGES[s])) for s in stages]


def _gguf(cfg: Config, stage_name: str, folder: Path) -> tuple[dict[str, Path], list[GGUFFile], dict]:
    """The model's GGUF files: the run's own when it deployed this folder, else converted and checked now."""
    from .deploy import deploy_model, smallest_file

    rec = deploy_model(cfg, stage_name, folder)
    files, listed = {}, []
    for quant, f in rec["files"].items():
        files[quant] = Path(f["path"])
        listed.append(
            GGUFFile(name="", quant=quant, size_bytes=int(f["size_bytes"]), bits_per_weight=f.get("bits_per_weight"))
        )
    small = smallest_file(rec)
    parity = rec.get("parity", {}).get("all", {})
    checks = {
        "parity_share": parity.get("share"),
        "parity_lines": parity.get("lines"),
        "mean_kld": (rec.get("quality", {}).get(small) or {}).get("mean_kld"),
    }
    return files, listed, checks


def _staged_dicts(staged: list[Staged]) -> list[dict]:
    return [{"repo": s.repo, "type": s.repo_type, "folder": str(s.folder), "private": s.private} for s in staged]


def publish_model(
    path: str | os.PathLike,
    repo: str | None = None,
    *,
    dry_run: bool = False,
    public: bool = False,
    gguf: str | None = None,
    reports: str | os.PathLike = "reports",
) -> PublishResult:
    """Publish the model of ``path`` (a run folder: its last model; or an export folder of a run under
    ``reports``) to ``repo`` (default ``publish.repo``): the steps of the module docstring.

    >>> publish_model("reports/smollm2", "me/az-135m", dry_run=True)["plan"]  # doctest: +SKIP
    """
    p = Path(path)
    if (p / "metrics.json").is_file() or p.name == "metrics.json":
        run_dir, doc = read_run(p)
        last, folder = model_of_run(doc)
    else:
        run_dir, doc, name = run_of_export(p, reports)
        last, folder = _stage_of_artifact(name), p
    cfg = run_config(doc)
    return _publish(cfg, doc, last, folder, repo, dry_run=dry_run, public=public, gguf=gguf)


def publish_job(cfg: Config, last: str, record: dict, folder: str | os.PathLike) -> PublishResult:
    """At the end of a SageMaker job (``launch.command: sft`` or ``prefer``, ``publish.repo`` set): publish the
    job's model ``folder`` (``SM_MODEL_DIR``) with a card from the command's own record (``prefer.json``'s held-out
    judgement; an SFT job records no before -> after measures), the token from the job's environment
    (``launch.forward_env``: HF_TOKEN)."""
    from ..utils import git_commit, machine_info
    from .prefer import judgement_rows

    run = {"run_name": cfg.run_name, "params_hash": cfg.hash(), "git_commit": git_commit(), "machine": machine_info()}
    metrics = {}
    notebooks = []
    if last == "preference":
        metrics["preference"] = {"judgement": judgement_rows(record), "steps": record["run"].get("steps")}
        notebooks = [{"name": PAGES[last], "seconds": record["run"].get("seconds")}]
    doc = {"run": run, "metrics": metrics, "notebooks": notebooks}
    return _publish(cfg, doc, last, Path(folder), None, dry_run=False, public=not cfg.publish.private, gguf=None)


def _publish(
    cfg: Config, doc: dict, last: str, folder: Path, repo: str | None, *, dry_run: bool, public: bool, gguf: str | None
) -> PublishResult:
    """The refusals, then the GGUF files, the cards and the staging of every folder, then the upload. Long because
    it is the one place that orders the refusals before the staging and the staging before the upload."""
    repo = check_repo_id(repo or cfg.publish.repo or "")
    layout = gguf or cfg.publish.gguf
    weights = export_files(folder)
    stages = stage_chain(cfg, last)
    inputs = training_inputs(cfg, stages)
    refused = refusals(inputs)
    base_model, lic, note = base_of(cfg, stages)
    if lic is None:
        refused.append(f"the model's license is unknown (base {base_model or 'none'}): set publish.license")
    token = None
    if not dry_run:
        if refused:
            raise LicenseError(_refusal(f"the model of run {cfg.run_name!r}", refused))
        token = require_token()
    scores, before = model_scores(cfg, doc, last)
    ggufs, listed, checks = ({}, [], {}) if layout == "none" else _gguf(cfg, last, folder)
    short = repo.split("/")[1]
    named = {f"{short}-{q}.gguf": f for q, f in ggufs.items()}
    for g, name in zip(listed, named):
        g["name"] = name
    gguf_repo = f"{repo}-GGUF" if layout == "separate" else None
    facts = ModelFacts(
        repo=repo,
        base_model=base_model,
        license=lic or "other",
        stages=stage_facts(cfg, doc, stages),
        scores=scores,
        inputs=inputs,
        run={**doc["run"], "machine": doc["run"].get("machine") or {}},
        compared_with=before,
        languages=cfg.publish.languages,
        base_note=note,
        chain=section(run_record(doc), "sft").get("stages") or [],
        gguf=listed,
        gguf_repo=gguf_repo,
        gguf_checks=checks,
    )
    out = Paths.of(cfg).artifacts / "publish" / repo.replace("/", "__")
    private = not public and cfg.publish.private
    files = {**weights, **(named if layout == "same" else {})}
    staged = [Staged(repo, "model", stage(files, model_card(facts), out / "model"), private)]
    if gguf_repo:
        gcard = model_card(
            ModelFacts(**{**facts.__dict__, "repo": gguf_repo, "base_model": repo, "gguf_repo": None, "weights": False})
        )
        staged.append(Staged(gguf_repo, "model", stage(named, gcard, out / "gguf"), private))
    return _finish(staged, refused, f"the model of run {cfg.run_name!r}", dry_run, token)


def _refusal(what: str, refused: list[str]) -> str:
    return (
        f"{what} may not be published ({len(refused)} problems; training on these inputs stays allowed, give a "
        f"source the license it really has with `license:` in the params, or publish a run whose inputs are all "
        f"redistributable):\n  " + "\n  ".join(refused)
    )


def _finish(staged: list[Staged], refused: list[str], what: str, dry_run: bool, token) -> PublishResult:
    lines = plan(staged)
    if dry_run:
        if refused:
            lines.append("the upload would be refused: " + _refusal(what, refused))
        return PublishResult(staged=_staged_dicts(staged), plan=lines, refused=refused, uploaded=[], dry_run=True)
    urls = upload_staged(staged, token)
    return PublishResult(staged=_staged_dicts(staged), plan=lines, refused=[], uploaded=urls, dry_run=False)


def publish_dataset(
    path: str | os.PathLike, repo: str | None = None, *, dry_run: bool = False, public: bool = False
) -> PublishResult:
    """Publish the corpus stage's output of the run at ``path`` (its ``artifacts.corpus`` folder) as parquet shards
    with a dataset card: each source's counts as the stage recorded them, the decontamination sets, the inputs'
    licenses."""
    run_dir, doc = read_run(path)
    cfg = run_config(doc)
    repo = check_repo_id(repo or (f"{cfg.publish.repo}-corpus" if cfg.publish.repo else ""))
    recorded = (doc.get("artifacts") or {}).get("corpus")
    if not recorded:
        raise PublishError(
            f"run {cfg.run_name!r} did not run the corpus stage (its metrics.json records no artifacts.corpus): "
            "publish a run whose notebooks include 00_corpus, such as params/default.yaml's"
        )
    folder = Path(recorded)
    manifest_file = folder / "manifest.json"
    if not manifest_file.is_file():
        raise PublishError(f"run {cfg.run_name!r}: its corpus stage output {folder} is gone; run notebook 00 again")
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    shards = [folder / s for s in manifest["shards"]]
    missing = [str(s) for s in shards if not s.is_file()]
    if missing:
        raise PublishError(f"the corpus stage output is not complete: missing {missing}")
    root = Paths.of(cfg).data_root
    given = {str(Path(f).resolve()) for f in resolve(cfg, cfg.data.train).files}
    inputs = []
    for item in manifest["inputs"]:
        where = _under(Path(item["file"]), root) if item.get("file") else str(item.get("hub"))
        src_lic = cfg.data.train.license if str(Path(item.get("file", "")).resolve()) in given else None
        lic = license_of(where, src_lic)
        how = "params" if src_lic else "azllm" if lic else "none"
        inputs.append(DataInput(stage="corpus", source="data.train", where=where, license=lic, license_from=how))
    refused = refusals(inputs)
    token = None
    if not dry_run:
        if refused:
            raise LicenseError(_refusal(f"the corpus of run {cfg.run_name!r}", refused))
        token = require_token()
    from ..corpus.pipeline import STEPS

    by = manifest["counts"]["by_source"]
    facts = DatasetFacts(
        repo=repo,
        sources=[{"source": k, **v} for k, v in sorted(by.items()) if k != "total"],
        steps=[s for s in STEPS if any(f"{s}_docs" in v for v in by.values())],
        decontamination=manifest["settings"].get("eval_sets") or {},
        decontamination_n=manifest["settings"].get("decontamination_n"),
        inputs=inputs,
        run=doc["run"],
        shards=[],
    )
    out = Paths.of(cfg).artifacts / "publish" / repo.replace("/", "__")
    parquet = corpus_parquet(shards, out / "parquet")
    facts.shards = sorted(parquet)
    staged = [
        Staged(
            repo, "dataset", stage(parquet, dataset_card(facts), out / "dataset"), not public and cfg.publish.private
        )
    ]
    return _finish(staged, refused, f"the corpus of run {cfg.run_name!r}", dry_run, token)
