"""The distillation study (notebook 08, ``azllm distill PARAMS``): a small student of the study's best Azerbaijani
model, against the same student on cross-entropy alone and against the teacher.

Reads ``distill`` (and ``train`` for the rest of the loop, ``adapt`` for the text, ``evaluate`` for the scores):

- :func:`teacher_folder`: ``distill.teacher``: ``adapt`` (the adaptation run with the lowest Azerbaijani bits per
  byte, exported: the ``adapt`` stage's output), ``sft`` (notebook 07's export) or a folder;
- :func:`distill_config`: the runs' config: the teacher's tokenizer, token files of the adaptation study's
  Azerbaijani text (``distill.train_bytes``) encoded with it, evaluated on the first Azerbaijani eval set and on
  held-out English (as notebook 05), the ``distill`` fields laid over ``train``'s;
- :func:`student`: the student of ``distill.init`` (:func:`azllm.distill.pruned_student` or
  :func:`azllm.distill.random_student`), refused unless its vocabulary is the teacher's;
- :func:`distill_run`: one student through :func:`azllm.train.run_training` with
  :class:`azllm.distill.DistillLoss` (``kd=False``: the cross-entropy baseline, the same student, tokens and
  steps); finished runs are returned as they are, interrupted ones resume;
- :func:`teacher_eval`: the teacher on the same evaluation windows (bits per byte);
- :func:`export_student`: a student as a standalone folder (safetensors, the teacher's tokenizer and chat
  template, loads with plain transformers and ``azllm eval``);
- :func:`run_distill`: all of it, the scores of notebook 06's tasks for the teacher and both students (cached by
  weights), and the paired KD-vs-CE comparison.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..config import Config, derive
from ..lifecycle import RunResult
from .paths import Paths
from .specs import build_spec

__all__ = [
    "teacher_folder",
    "distill_config",
    "distill_data",
    "student",
    "distill_spec",
    "distill_run",
    "teacher_eval",
    "export_student",
    "score_models",
    "run_distill",
    "student_rows",
    "bpb_verdict",
    "az_set_name",
    "deployed_labels",
]


def teacher_folder(cfg: Config) -> tuple[str, dict]:
    """``(folder or hub id, note)`` of ``distill.teacher`` (module docstring): ``adapt`` and ``sft`` are those stages'
    outputs (:func:`azllm.recipes.stages.require`: found by their markers, or built once)."""
    from . import stages

    t = cfg.distill.teacher
    if t == "adapt":
        done = stages.require(cfg, "adapt")
        how = "the adaptation run with the lowest Azerbaijani bits per byte"
        return done["artifact"], {**done["note"], "base": done["artifact"], "how": how}
    if t == "sft":
        done = stages.require(cfg, "sft")
        adapted = stages.finished(cfg, "adapt")
        base_note = {**adapted["note"], "base": adapted["artifact"]} if adapted and not cfg.sft.base else None
        return done["artifact"], {
            "base": done["artifact"],
            "how": "notebook 07's instruction-tuned export",
            "sft_base": base_note or {"base": done.get("base"), "how": "sft.base" if cfg.sft.base else "its marker"},
        }
    return t, {"base": t, "how": "distill.teacher"}


def distill_config(cfg: Config, teacher: str) -> Config:
    """The config of the distillation runs (module docstring)."""
    from . import adapt

    d, a = cfg.distill, cfg.adapt
    az = adapt.az_set(cfg)
    own = {k: getattr(d, k) for k in ("max_steps", "lr", "warmup_steps", "eval_steps", "save_steps")}
    return derive(
        cfg,
        data={
            "train": {**cfg.data.train.model_dump(), "max_bytes": d.train_bytes or a.az_train_bytes},
            "eval": {az: cfg.data.eval[az].model_dump(), adapt.EN_SET: a.english_eval.model_dump()},
        },
        tokens={"tokenizer": str(teacher), "dir": str(Paths.of(cfg).distill / "tokens")},
        model={"base": None},
        train={**own, "eval_on_start": True, "compare": [], "rows_only_steps": 0},
        corpus={"enabled": False},
    )


def distill_data(cfg_d: Config) -> dict:
    """The teacher tokenizer's token files of :func:`distill_config` (:func:`azllm.recipes.tokens.prepare_data`)."""
    from .tokens import prepare_data

    return prepare_data(cfg_d)


def _teacher_id(teacher: str) -> str:
    """What identifies the teacher's weights (:func:`azllm.utils.weights_id`)."""
    from ..utils import weights_id

    return weights_id(teacher)


def _load(folder: str):
    from ..assemble import load_base

    return load_base(folder, None)


def student(cfg: Config, teacher_model, tokenizer_size: int | None = None):
    """The student of ``distill.init`` for ``teacher_model`` (its vocabulary checked against the teacher's and the
    tokenizer's size)."""
    from ..distill import check_vocab, pruned_student, random_student
    from ..utils import seed_everything

    d = cfg.distill
    seed_everything(cfg.seed)
    s = pruned_student(teacher_model, keep_every=d.keep_every)
    if d.init == "random":
        shape = {"num_hidden_layers": s.config.num_hidden_layers, **d.student_config}
        s = random_student(teacher_model.config, seed=cfg.seed, **shape)
    check_vocab(s, teacher_model, tokenizer_size)
    return s


def distill_spec(cfg_d: Config, *, kd: bool):
    """The :class:`azllm.distill.DistillSpec` of a run: ``train`` (with ``distill``'s fields laid over it by
    :func:`distill_config`) and the loss's fields; the baseline's ``kd_weight`` is 0."""
    from ..distill import DistillSpec

    over = {} if kd else {"kd_weight": 0.0}
    return build_spec(DistillSpec, cfg_d.distill, cfg_d.train, seed=cfg_d.seed, **over)


def distill_run(cfg: Config, teacher: str, *, kd: bool = True, progress: bool = True) -> RunResult:
    """One student (``kd``: distilled; else the cross-entropy baseline) trained on :func:`distill_data` through
    the one lifecycle (:func:`azllm.train.run_training` with the distillation loss); a finished identical run is
    returned as it is (the folder is named by the run's key). Without ``model`` and ``trainer``."""
    from ..distill import DistillLoss
    from ..lifecycle import finished_result
    from ..model import count_parameters
    from ..tokens import read_header
    from ..train import run_key, run_training

    cfg_d = distill_config(cfg, teacher)
    data = distill_data(cfg_d)
    tok = data["tokenizer"]
    spec = distill_spec(cfg_d, kd=kd)
    d = cfg.distill
    key = run_key(
        model={
            "teacher": _teacher_id(teacher),
            "init": d.init,
            "keep_every": d.keep_every,
            "student_config": d.student_config,
            "seed": cfg.seed,
        },
        train=spec,
        tokenizer=tok.fingerprint,
        data={k: read_header(data[k]).get("key") for k in ("train", "val")},
        eval_sets=sorted(data["dev"]),
    )
    out = Paths.of(cfg).distill / f"{'kd' if kd else 'ce'}-{key}"
    done = finished_result(out, key)
    if done is not None:
        return done
    teacher_model = _load(teacher)
    model = student(cfg, teacher_model, tok.vocab_size)
    loss = DistillLoss(
        teacher_model if kd else None,
        kd_weight=spec.kd_weight,
        temperature=spec.temperature,
        chunk_tokens=spec.chunk_tokens,
    )
    info = {
        "method": "kd" if kd else "ce",
        "student": "kd" if kd else "ce",
        "parameters": count_parameters(model),
        "teacher_parameters": count_parameters(teacher_model),
        "layers": model.config.num_hidden_layers,
        "teacher_layers": teacher_model.config.num_hidden_layers,
        "init": d.init,
        "teacher": str(teacher),
    }
    r = run_training(
        model,
        spec,
        tokenizer=tok,
        train_file=data["train"],
        eval_files={"val": data["val"], **data["dev"]},
        output_dir=out,
        key=key,
        info=info,
        loss_fn=loss,
        progress=progress,
    )
    return {k: v for k, v in r.items() if k not in ("model", "trainer")}


def teacher_eval(cfg: Config, teacher: str) -> dict:
    """The teacher's loss and bits per byte on the students' evaluation windows (``{set: {"loss", "bpb", ...}}``),
    in the precision the students are evaluated in, cached beside the students by the teacher's weights."""
    import torch

    from ..loop import batch_tokens, precision_flags
    from ..train import make_eval_set
    from ..utils import atomic_write_json

    cfg_d = distill_config(cfg, teacher)
    data = distill_data(cfg_d)
    tok, spec = data["tokenizer"], distill_spec(cfg_d, kd=False)
    cache = Paths.of(cfg).distill / f"teacher-eval-{_teacher_id(teacher)}-{spec.block_size}-{spec.eval_max_tokens}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = _load(teacher).eval().to(dev)
    n = sum(p.numel() for p in model.parameters())
    bf16 = precision_flags(spec.precision, n, batch_tokens(spec))["bf16"]  # as the students' evaluation
    out = {}
    for name, path in {"val": data["val"], **data["dev"]}.items():
        info = make_eval_set(path, tok, spec.block_size, spec.eval_max_tokens)
        nll = 0.0
        with torch.no_grad(), torch.autocast(dev, dtype=torch.bfloat16, enabled=bf16):
            for i in range(0, info["windows"], spec.eval_batch_size):
                x = torch.stack(
                    [info["dataset"][j]["input_ids"] for j in range(i, min(i + spec.eval_batch_size, info["windows"]))]
                ).to(dev)
                nll += float(model(input_ids=x, labels=x).loss) * x.shape[0] * (x.shape[1] - 1)
        loss = nll / info["predicted_tokens"]
        out[name] = {"loss": loss, "bpb": nll / 0.6931471805599453 / info["bytes"]}
    atomic_write_json(cache, out)
    return out


def export_student(cfg: Config, result: dict, teacher: str) -> Path:
    """A finished student as a standalone folder (its ``final/`` weights, the teacher's tokenizer files and chat
    template, the teacher's generation config); an export of the same run is returned as it is."""
    from ..export import copy_tokenizer_files
    from ..utils import atomic_write_json, replace_dir

    folder = Paths.of(cfg).distill_export(result["student"])
    marker = folder / "azllm_export.json"
    record = {"key": result["key"], "student": result["student"], "teacher": str(teacher)}
    if marker.is_file() and json.loads(marker.read_text()) == record:
        return folder
    model = _load(result["final_dir"])
    tmp = folder.with_name(folder.name + ".tmp")
    model.save_pretrained(str(tmp), safe_serialization=True)
    copy_tokenizer_files(teacher, tmp)
    gen = Path(teacher) / "generation_config.json"
    if gen.is_file():
        (tmp / "generation_config.json").write_bytes(gen.read_bytes())
    atomic_write_json(tmp / "azllm_export.json", record)
    replace_dir(tmp, folder)
    return folder


def score_models(cfg: Config, folders: dict[str, str]) -> dict[str, dict]:
    """Notebook 06's tasks and probe for each named folder (:func:`azllm.recipes.evaluate.score_model`, cached in
    ``artifacts/<run>/eval/`` by the weights)."""
    from ..evaluation.load import load_model
    from ..utils import weights_id
    from . import evaluate

    out = {}
    for name, folder in folders.items():
        model, tok, _ = load_model(folder)
        out[name] = evaluate.score_model(
            cfg,
            model,
            tok,
            name=name,
            cache_dir=Paths.of(cfg).artifacts / "eval" / Path(str(folder)).name,
            model_id=weights_id(folder),
        )
    return out


def run_distill(cfg: Config, *, progress: bool = True, show=lambda line: None) -> dict:
    """The whole study (module docstring): ``{"teacher": {"folder", "note", "eval"}, "runs": {"kd", "ce"},
    "exports": {"kd", "ce"}, "scores": {"teacher", "kd", "ce"}, "kd_vs_ce": rows, "kd_vs_teacher": rows}``.
    With exports, the stage's marker (:func:`azllm.recipes.stages.mark`) names the KD student's folder and holds
    the teacher's and every export's, for deployment (:func:`azllm.recipes.stages.require`)."""
    from . import evaluate, stages

    teacher, note = teacher_folder(cfg)
    runs = {"kd": distill_run(cfg, teacher, kd=True, progress=progress)}
    if cfg.distill.baseline:
        runs["ce"] = distill_run(cfg, teacher, kd=False, progress=progress)
    stopped = [f"{k} at step {r['steps']}" for k, r in runs.items() if r.get("interrupted")]
    if stopped:
        raise RuntimeError(f"student run(s) {', '.join(stopped)} were interrupted by a signal: run again to resume")
    exports = {k: str(export_student(cfg, r, teacher)) for k, r in runs.items()} if cfg.distill.export else {}
    scores = score_models(cfg, {"teacher": teacher, **exports}) if exports else {}
    out = {
        "teacher": {"folder": str(teacher), "note": note, "eval": teacher_eval(cfg, teacher)},
        "runs": runs,
        "exports": exports,
        "scores": scores,
    }
    if "kd" in scores and "ce" in scores:
        out["kd_vs_ce"] = evaluate.pair_rows(cfg, scores["ce"], scores["kd"])
    if "kd" in scores:
        out["kd_vs_teacher"] = evaluate.pair_rows(cfg, scores["teacher"], scores["kd"])
    if exports:
        stages.mark(cfg, "distill", exports["kd"], teacher=str(teacher), exports=exports)
        show(f"distill: the students in {', '.join(exports.values())}")
    return out


def _folder_mb(folder: str | Path) -> float | None:
    files = list(Path(folder).glob("*.safetensors")) if Path(str(folder)).is_dir() else []
    return sum(p.stat().st_size for p in files) / 1e6 if files else None


def student_rows(cfg: Config, study: dict) -> list[dict]:
    """One row per model of the study (the teacher, the KD student, the cross-entropy student): parameters,
    layers, weights on disk, bits per byte on the Azerbaijani and the English eval sets, training tokens/s."""
    from .adapt import EN_SET, az_set

    az = az_set(cfg)
    runs = study["runs"]
    any_run = next(iter(runs.values()))
    t_eval = study["teacher"]["eval"]
    rows = [
        {
            "model": "teacher",
            "parameters_m": any_run["teacher_parameters"]["total"] / 1e6,
            "layers": any_run["teacher_layers"],
            "weights_mb": _folder_mb(study["teacher"]["folder"]),
            "az_bpb": t_eval[az]["bpb"],
            "en_bpb": t_eval[EN_SET]["bpb"],
            "train_tokens_per_s": None,
            "steps": None,
        }
    ]
    for name, r in runs.items():
        rows.append(
            {
                "model": {"kd": "student (KD)", "ce": "student (cross-entropy)"}[name],
                "parameters_m": r["parameters"]["total"] / 1e6,
                "layers": r["layers"],
                "weights_mb": _folder_mb(study["exports"][name]) if name in study["exports"] else None,
                "az_bpb": r["final"][az]["bpb"],
                "en_bpb": r["final"][EN_SET]["bpb"],
                "train_tokens_per_s": r["throughput"].get("tokens_per_s"),
                "steps": r["steps"],
            }
        )
    return rows


def bpb_verdict(study: dict, cfg: Config) -> dict:
    """The KD student's bits per byte against the cross-entropy student's on the Azerbaijani set, and the share of
    the teacher-to-baseline gap the distillation closed. Bits per byte on a fixed set of windows carries no
    sampling error of its own here; the tasks' paired verdicts carry the uncertainty."""
    from .adapt import az_set

    az = az_set(cfg)
    runs, t = study["runs"], study["teacher"]["eval"][az]["bpb"]
    if "ce" not in runs:
        return {}
    kd, ce = runs["kd"]["final"][az]["bpb"], runs["ce"]["final"][az]["bpb"]
    gap = ce - t
    return {
        "az_set": az,
        "kd_bpb": kd,
        "ce_bpb": ce,
        "teacher_bpb": t,
        "kd_minus_ce": kd - ce,
        "gap_closed": (ce - kd) / gap if gap > 0 else None,
    }


def az_set_name(cfg: Config) -> str:
    """The Azerbaijani eval set the students are compared on (notebook 05's, :func:`azllm.recipes.adapt.az_set`)."""
    from .adapt import az_set

    return az_set(cfg)


def deployed_labels(cfg: Config) -> dict[str, str]:
    """``deploy.models`` names -> the labels of :func:`student_rows` (for the size-vs-quality plot)."""
    labels = {"student": "student (KD)", "baseline": "student (cross-entropy)", "teacher": "teacher"}
    return {n: labels[n] for n in cfg.deploy.models if n in labels}
