"""Downstream evaluation (notebook 06, ``azllm eval``): score a model on the Azerbaijani and English tasks of
``evaluate``, and every adaptation way of notebook 05 before and after.

Reads ``evaluate`` (and, for the study, ``adapt`` and ``benchmark.job``):

- :func:`score_model`: one model (in memory) on ``evaluate.tasks`` with lm-eval
  (:func:`azllm.evaluation.harness.score`) plus the linear probe (:mod:`azllm.evaluation.probe`); cached in the
  model's folder by the evaluation settings;
- :func:`evaluate_model`: a folder (export, ``final/``, ``checkpoint-N/``) or a hub id, loaded
  (:func:`azllm.evaluation.load.load_model`) and scored; writes ``results.json`` (what ``azllm eval`` does);
- :func:`study`: the base of notebook 05 and the merged export of each of its runs, scored;
- :func:`before_after`: one row per run: each task before -> after, the difference, its standard error and the
  verdict (:func:`azllm.evaluation.compare.difference`, ``evaluate.z``), next to bpb, tokens/s and wall time;
- :func:`ranking`: one row per recipe (way x method) sorted by the Azerbaijani gain per device-hour;
  :func:`ranking_record`: with its winner, what the index answers;
- :func:`contamination`: per evaluation set, the training documents it would remove, and few-shot/test overlap.

Which numbers are informative at which size: a 1-2M-parameter stand-in sits at chance on every multiple-choice
task (SIB-200, TUMLU, MMLU) and near zero chrF++; only bits per byte and the linear probe (a logistic regression on
its hidden states, which needs no generation and no calibrated answer) separate such models. From about 100M
parameters (SmolLM2-135M) SIB-200 in English rises above chance; TUMLU and MMLU need ~1B+ (published TUMLU-mini
5-shot: Llama-3.1-8B 48.4, chance 25).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..config import Config
from ..utils import atomic_write_json, json_hash, weights_id
from .paths import Paths, run_name
from .tasks import hub_tasks, local_configs, local_task_args, probe_rows

__all__ = [
    "settings_key",
    "score_model",
    "probe_scores",
    "power_rows",
    "evaluate_model",
    "folder_scores",
    "base_scores",
    "study",
    "before_after",
    "ranking",
    "ranking_record",
    "contamination",
    "conventions",
    "results_record",
    "scoring_benchmark",
    "score_pair",
    "pair_rows",
]


def settings_key(cfg: Config, model_id: str = "") -> str:
    """What a cached score depends on: the evaluation settings, the data root, the seed and the model."""
    return json_hash(
        {
            "evaluate": cfg.evaluate.model_dump(mode="json"),
            "seed": cfg.seed,
            "root": str(Paths.of(cfg).data_root),
            "model": model_id,
        }
    )


def probe_scores(cfg: Config, model, tokenizer) -> dict:
    """``{"<task>_probe": entry}`` for each ``evaluate.probe.tasks``: accuracy of a logistic regression on the
    model's mean-pooled hidden states (cross-validated over ``evaluate.probe.folds``, or train split -> test split),
    its standard error, chance (the majority-class rate), per-item results."""
    from ..evaluation.probe import probe_task

    p, out = cfg.evaluate.probe, {}
    for task in p.tasks:
        train, test = probe_rows(cfg, task)
        if not train or not test:
            continue
        pairs = lambda rows: [(x["text"], x["label"]) for x in rows]  # noqa: E731
        both = list({x["id"]: x for x in train + test}.values())  # an item in both splits (a folder of both) once
        r = probe_task(
            model,
            tokenizer,
            pairs(both) if p.folds else pairs(train),
            None if p.folds else pairs(test),
            seed=cfg.seed,
            layer=p.layer,
            max_length=p.max_length,
            batch_size=p.batch_size,
            C=p.C,
            folds=p.folds or 5,
        )
        out[f"{task}_probe"] = {
            "acc": r["accuracy"],
            "acc_stderr": r["stderr"],
            "headline": "acc",
            "value": r["accuracy"],
            "stderr": r["stderr"],
            "n": r["n_test"],
            "output_type": "probe",
            "num_fewshot": None,
            "chance": r["chance_majority"],
            "items": [float(c) for c in r["correct"]],
            "n_train": r["n_train"],
        }
    return out


def score_model(
    cfg: Config, model, tokenizer, *, name: str, cache_dir: str | os.PathLike | None = None, model_id: str = ""
) -> dict:
    """Scores of one in-memory model with its Hugging Face tokenizer: lm-eval tasks and the probe. With
    ``cache_dir`` the result is kept there (``eval-<settings and model_id>.json``) and returned as is next time."""
    from ..evaluation.harness import score

    ev = cfg.evaluate
    cache = Path(cache_dir) / f"eval-{settings_key(cfg, model_id)}.json" if cache_dir else None
    if cache is not None and cache.is_file():
        return json.loads(cache.read_text())
    configs, hub = local_configs(cfg), hub_tasks(cfg)
    res = score(
        model,
        tokenizer,
        configs,
        hub_tasks=hub,
        batch_size=ev.batch_size,
        limit=ev.limit,
        seed=cfg.seed,
        bootstrap_iters=ev.bootstrap_iters,
        max_length=ev.max_length,
    )
    res["tasks"].update(probe_scores(cfg, model, tokenizer))
    res["name"] = name
    res["fewshot_overlap"] = _overlaps(configs)
    if cache is not None:
        atomic_write_json(cache, res)
    return res


def _overlaps(configs: list[dict]) -> dict:
    from ..evaluation.tasks import fewshot_overlap

    out = {}
    for c in configs:
        if c.get("fewshot_split") and c.get("num_fewshot"):
            out[c["task"]] = fewshot_overlap(c)
    return out


def results_record(cfg: Config, res: dict, info: dict) -> dict:
    """What ``results.json`` holds: the scores, the model, and the run's identity (params hash, seed)."""
    return {
        "model": info,
        "params_hash": cfg.hash(),
        "seed": cfg.seed,
        "evaluate": cfg.evaluate.model_dump(mode="json"),
        **res,
    }


def evaluate_model(
    cfg: Config, spec: str, *, tokenizer: str | None = None, out: str | os.PathLike | None = None
) -> tuple[dict, Path]:
    """Load a folder or hub id and score it; writes ``results.json`` into ``out`` (default
    ``artifacts/<run>/eval/<model name>/``). Returns ``(results, path)``."""
    from ..evaluation.load import load_model

    hub_tasks(cfg), local_configs(cfg)  # a bad task name or file fails before the model loads
    model, tok, info = load_model(spec, tokenizer=tokenizer)
    res = score_model(cfg, model, tok, name=Path(str(spec)).name)
    folder = Path(out) if out else Paths.of(cfg).artifacts / "eval" / Path(str(spec)).name
    path = folder / "results.json"
    atomic_write_json(path, results_record(cfg, res, info))
    return res, path


# --------------------------------------------------------------------------------------------- the study


def study(cfg: Config, base: str, base_tok, runs: list[dict], toks: dict) -> tuple[dict, dict]:
    """The base of notebook 05 and the merged export of every run, scored: ``(before, {(way, method): after})``."""
    from ..evaluation.load import load_model
    from .adapt import export_run

    before = base_scores(cfg, base, tokenizer=base_tok.path)
    after = {}
    for r in runs:
        folder = export_run(cfg, r, base, base_tok, toks[r["way"]])
        m, t, _ = load_model(folder)
        name = run_name(r["way"], r["method"])
        # cached as score_pair caches a folder: notebook 07 scores the export it instruction-tunes without a rerun
        after[(r["way"], r["method"])] = score_model(
            cfg,
            m,
            t,
            name=name,
            cache_dir=Paths.of(cfg).artifacts / "eval" / Path(folder).name,
            model_id=weights_id(folder),
        )
    return before, after


def score_pair(cfg: Config, before: str, after: str) -> tuple[dict, dict]:
    """Two model folders (a base and what was trained from it, e.g. notebook 07's SFT export) scored on
    ``evaluate.tasks``, each cached in ``artifacts/<run>/eval/`` by its weights (:func:`folder_scores`)."""
    return folder_scores(cfg, before), folder_scores(cfg, after)


def folder_scores(cfg: Config, spec: str) -> dict:
    """One model folder scored on ``evaluate.tasks``, cached in ``artifacts/<run>/eval/<folder name>/`` by its
    weights (what :func:`score_pair` and :func:`study` read back)."""
    from ..evaluation.load import load_model

    model, tok, _ = load_model(spec)
    cache = Paths.of(cfg).artifacts / "eval" / Path(str(spec)).name
    return score_model(cfg, model, tok, name=Path(str(spec)).name, cache_dir=cache, model_id=weights_id(spec))


def base_scores(cfg: Config, base: str, tokenizer: str | None = None) -> dict:
    """The study's base (``adapt.base``, as notebook 05 loads it) scored on ``evaluate.tasks``: the "before" of
    every adaptation run, cached in ``Paths.adapt / "base-eval"`` by its weights."""
    from ..evaluation.load import load_model

    model, tok, _ = load_model(base, tokenizer=tokenizer)
    cache = Paths.of(cfg).adapt / "base-eval"
    return score_model(cfg, model, tok, name="base", cache_dir=cache, model_id=weights_id(base))


def pair_rows(cfg: Config, before: dict, after: dict) -> list[dict]:
    """One row per task of two scores: before -> after with standard errors, the difference and its verdict."""
    from ..evaluation.compare import difference

    ev, rows = cfg.evaluate, []
    for task, b in before["tasks"].items():
        a = after["tasks"].get(task)
        if a is None:
            continue
        d = difference(b, a, z=ev.z)
        rows.append(
            {
                "task": task,
                "language": "az" if task in ev.az_tasks else "en" if task in ev.en_tasks else "—",
                "metric": a["headline"],
                "before": b["value"],
                "before_se": b["stderr"],
                "after": a["value"],
                "after_se": a["stderr"],
                "delta": d["delta"],
                "delta_se": d["se"],
                "verdict": d["verdict"],
                "mde": d["mde"],
                "chance": a.get("chance"),
                "n": a.get("n"),
            }
        )
    return rows


def before_after(cfg: Config, before: dict, after: dict, runs: list[dict]) -> list[dict]:
    """One row per run and task: before -> after with standard errors, the difference and its verdict."""
    from ..evaluation.compare import difference

    ev, rows = cfg.evaluate, []
    by_run = {(r["way"], r["method"]): r for r in runs}
    for (way, method), res in after.items():
        run = by_run.get((way, method), {})
        for task, b in before["tasks"].items():
            a = res["tasks"].get(task)
            if a is None or task.startswith("mmlu_en_"):
                continue
            d = difference(b, a, z=ev.z)
            rows.append(
                {
                    "way": way,
                    "method": method,
                    "task": task,
                    "language": "az" if task in ev.az_tasks else "en" if task in ev.en_tasks else "—",
                    "metric": a["headline"],
                    "before": b["value"],
                    "before_se": b["stderr"],
                    "after": a["value"],
                    "after_se": a["stderr"],
                    "delta": d["delta"],
                    "delta_se": d["se"],
                    "paired": d["paired"],
                    "verdict": d["verdict"],
                    "mde": d["mde"],
                    "chance": a.get("chance"),
                    "below_baseline": below_baseline(a, b["value"]),
                    "n": a.get("n"),
                    "az_bpb_after": run["final"][run["az_set"]]["bpb"] if run else None,
                    "tokens_per_s": run["throughput"]["tokens_per_s"] if run else None,
                    "seconds": run.get("seconds"),
                }
            )
    return rows


def below_baseline(after: dict, before_value: float) -> bool:
    """Whether a translation task's score sits at or below its identity baseline (the source copied as its
    translation: :func:`azllm.evaluation.tasks.chance`) both before and after: a change between two models that
    have not shown that they translate.

    >>> below_baseline({"headline": "chrf", "value": 5.9, "chance": 16.0}, 12.9)
    True
    >>> below_baseline({"headline": "chrf", "value": 18.0, "chance": 16.0}, 12.9), below_baseline({"value": 0.1}, 0.2)
    (False, False)
    """
    chance = after.get("chance")
    return after.get("headline") == "chrf" and chance is not None and max(after["value"], before_value) <= chance


def power_rows(rows: list[dict]) -> list[dict]:
    """What each measure can detect (:func:`before_after`'s rows): per task its items, chance, the median paired
    standard error over the runs, the minimum detectable effect at 80% power (:func:`azllm.evaluation.compare.mde`)
    and the largest change any run showed. A measure whose MDE is larger than every plausible gain needs more items,
    not more steps."""
    import statistics

    out = {}
    for r in rows:
        if r["delta_se"] is None:
            continue
        t = out.setdefault(r["task"], {"task": r["task"], "language": r["language"], "metric": r["metric"]})
        t.update(n=r["n"], chance=r["chance"])
        t.setdefault("_se", []).append(r["delta_se"])
        t.setdefault("_mde", []).append(r["mde"] if r["mde"] is not None else 0.0)
        t["largest_change"] = max(t.get("largest_change", 0.0), abs(r["delta"]))
    for t in out.values():
        t["median_se"], t["mde"] = statistics.median(t.pop("_se")), statistics.median(t.pop("_mde"))
    return list(out.values())


def ranking(cfg: Config, rows: list[dict], runs: list[dict]) -> list[dict]:
    """One row per recipe: the headline Azerbaijani gain (``evaluate.az_headline``) per device-hour, the English
    change (``evaluate.en_headline``), their standard errors and verdicts, the device-hours measured here and the
    cost of the same tokens on the GPU plan of ``benchmark.job``."""
    ev, job = cfg.evaluate, cfg.benchmark.job
    out = []
    for run in runs:
        key = (run["way"], run["method"])
        az = next((r for r in rows if (r["way"], r["method"]) == key and r["task"] == ev.az_headline), None)
        en = next((r for r in rows if (r["way"], r["method"]) == key and r["task"] == ev.en_headline), None)
        hours = (run.get("seconds") or 0) / 3600
        tokens = run["steps"] * run["throughput"]["tokens_per_step"]
        gpu_hours = tokens / job.tokens_per_s / 3600 if tokens and job.tokens_per_s else None
        out.append(
            {
                "way": run["way"],
                "method": run["method"],
                "az_gain": az["delta"] if az else None,
                "az_gain_se": az["delta_se"] if az else None,
                "az_verdict": az["verdict"] if az else None,
                "en_change": en["delta"] if en else None,
                "en_change_se": en["delta_se"] if en else None,
                "en_verdict": en["verdict"] if en else None,
                "device_hours": hours,
                "az_gain_per_device_hour": (az["delta"] / hours) if az and hours else None,
                "tokens_trained": tokens,
                "gpu_plan_hours": gpu_hours,
                "gpu_plan_cost": gpu_hours * job.price_per_hour / job.gpus_per_instance if gpu_hours else None,
            }
        )
    return sorted(
        out,
        key=lambda r: -(r["az_gain_per_device_hour"] if r["az_gain_per_device_hour"] is not None else float("-inf")),
    )


def ranking_record(cfg: Config, rank: list[dict]) -> dict:
    """What notebook 06 records of :func:`ranking`: the rows, the winner (``top``: the first recipe with an
    Azerbaijani score before and after, None when none has one) and the headline tasks it was ranked by."""
    return {
        "ranking": rank,
        "top": next((r for r in rank if r["az_gain"] is not None), None),
        "az_headline": cfg.evaluate.az_headline,
        "en_headline": cfg.evaluate.en_headline,
    }


def base_at_chance(cfg: Config, before: dict) -> bool:
    """Whether the base sits at chance on every multiple-choice task it was scored on (within ``evaluate.z``
    standard errors of the chance level): its downstream before -> after answers are then noise. The probes and
    the translation tasks (whose chance is the identity baseline) do not count."""
    mc = [
        t
        for n, t in before["tasks"].items()
        if t.get("chance") is not None
        and t.get("stderr") is not None
        and not n.endswith("_probe")
        and t.get("output_type") != "generate_until"  # a translation's chance is a baseline, not a guess
    ]
    return bool(mc) and all(abs(t["value"] - t["chance"]) <= cfg.evaluate.z * max(t["stderr"], 1e-9) for t in mc)


def moved(cfg: Config, before: dict, rows: list[dict], runs: list[dict]) -> dict:
    """What the study shows, task by task (:func:`before_after`'s rows): every Azerbaijani and English change
    beyond the noise, whether the base sits at chance (:func:`base_at_chance`), and, for each Azerbaijani change
    within the noise that points up, the steps (and tokens) it would take to clear ``evaluate.z`` standard errors
    *if the change grew in proportion to the steps* (an optimistic extrapolation: the standard error stays as
    measured) beside the run's last bits-per-byte slope (``az_bpb_fall_per_100_steps`` when it still falls: more
    steps still help). ``stand_in``: the base is the small Llama notebook 05 pretrains (``adapt.base`` unset), whose
    task scores are not an answer even when one of them drifts off chance by luck."""
    z = cfg.evaluate.z
    by_run = {(r["way"], r["method"]): r for r in runs}
    beyond = [r for r in rows if r["verdict"] in ("gain", "loss")]
    to_signal = []
    for r in rows:
        run = by_run.get((r["way"], r["method"]))
        if r["language"] != "az" or r["verdict"] != "within noise" or run is None or not r["delta"] > 0:
            continue
        factor = z * r["delta_se"] / r["delta"]
        pts = run["curves"]["eval"].get(run["az_set"], [])
        slope = (
            (pts[-1]["bpb"] - pts[-2]["bpb"]) / (pts[-1]["step"] - pts[-2]["step"]) * 100
            if len(pts) >= 2 and pts[-1]["step"] > pts[-2]["step"]
            else None
        )
        to_signal.append(
            {
                "way": r["way"],
                "method": r["method"],
                "task": r["task"],
                "delta": r["delta"],
                "delta_se": r["delta_se"],
                "steps": run["steps"],
                "steps_needed": int(math.ceil(run["steps"] * factor)),
                "tokens_needed": int(math.ceil(run["steps"] * factor * run["throughput"]["tokens_per_step"])),
                "az_bpb_per_100_steps": slope,
                "az_bpb_fall_per_100_steps": -slope if slope is not None and slope < 0 else None,
            }
        )
    return {
        "az": [r for r in beyond if r["language"] == "az"],
        "en": [r for r in beyond if r["language"] == "en"],
        "base_at_chance": base_at_chance(cfg, before),
        "stand_in": cfg.adapt.base is None,
        "to_signal": to_signal,
        "z": z,
    }


def conventions(before: dict, after: dict) -> list[dict]:
    """Per model: whether its tokenizer prepends BOS by default (what lm-eval then does), the few-shot seed, the
    lm-eval version."""
    models = {"base": before, **{run_name(w, m): r for (w, m), r in after.items()}}
    return [
        {
            "model": k,
            "bos_token": r["bos"]["bos_token"],
            "prepends_bos": r["bos"]["prepends_bos"],
            "fewshot_seed": r["seed"],
            "lm_eval": r["lm_eval"],
        }
        for k, r in models.items()
    ]


def contamination(cfg: Config, docs: list[str] | None = None) -> list[dict]:
    """Per evaluation set (``data.eval``, ``data.parallel`` and every local task): how many training documents
    (``docs``, default every document of ``data.train`` before cleaning) it would remove on its own
    (:func:`azllm.corpus.decontaminate.hits_by_set`, the corpus stage's n-gram rule)."""
    from ..corpus.decontaminate import hits_by_set
    from ..data import iter_documents
    from .corpus import eval_sets
    from .sources import resolve
    from .tasks import decontamination_sets

    if docs is None:
        docs = iter_documents(resolve(cfg, cfg.data.train))

    evals, parallel, _ = eval_sets(cfg)
    sets = {**evals, **{f"{k}.az": v[0] for k, v in parallel.items()}, **decontamination_sets(cfg)}
    hits = hits_by_set(docs, sets, n=cfg.corpus.decontamination_n, min_words=cfg.corpus.decontamination_min_words)
    return [{"set": k, "lines": len(sets[k]), "training_documents_removed": v} for k, v in hits.items()]


def scoring_benchmark(
    cfg: Config, model: str, *, task: str | None = None, rounds: int = 3, batch_sizes: tuple[int, ...] = (1, 16)
) -> dict:
    """Items per second of one multiple-choice task (default: the first local one of ``evaluate.tasks``) on a model
    folder, batched vs one request at a time (:func:`azllm.bench.evaluation.benchmark`); written to
    ``artifacts/<run>/eval_benchmark.json``."""
    from ..bench.evaluation import benchmark
    from ..evaluation import UnknownTaskError
    from ..evaluation.tasks import LOCAL_TASKS, read_task_yaml

    ev, paths = cfg.evaluate, Paths.of(cfg)
    if task is None:
        task = next(
            (
                t
                for t in ev.tasks
                if t in LOCAL_TASKS
                and t in ev.local
                and read_task_yaml(LOCAL_TASKS[t]).get("output_type") == "multiple_choice"
            ),
            None,
        )
    if task is None or task not in ev.local:
        raise UnknownTaskError(f"no local multiple-choice task to time (evaluate.tasks: {ev.tasks}); pass --task")
    args = local_task_args(cfg, task)
    res = benchmark(model, task, args, batch_sizes=batch_sizes, rounds=rounds)
    atomic_write_json(paths.artifacts / "eval_benchmark.json", res)
    return res
