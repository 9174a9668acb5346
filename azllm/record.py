"""The typed record of a run: what every renderer reads of a ``metrics.json`` (the index's answers,
``azllm results``, the README's and docs' tables, the model card), one schema with a version.

:func:`run_record` keeps, section by section (:data:`KEEP`), what the renderers read of a run's ``metrics.json``, with
where it came from (commit, params hash, machine, each page's time); :func:`read_record` reads a run folder, a
``metrics.json`` or a committed record (``docs/*.json``) as it is. A record without ``schema`` is version 1, the
shape of the records committed before the field existed: a renderer reads the same keys in both, and a section or
key a run did not produce is absent, never invented.

Each before -> after measure, whatever its stage, is one :class:`Change` row; the sections hold lists of them
(``evaluate.before_after``, ``sft.chrf_before_after`` / ``tasks_before_after``, ``preference.judgement`` /
``tasks_before_after``).

>>> r = run_record({"run": {"run_name": "x", "git_commit": "abc", "params_hash": "h", "machine": {}}, "metrics": {},
...             "notebooks": [{"name": "05_adapt", "seconds": 12.5, "status": "ok"}], "artifacts": {}})
>>> r["schema"], r["run"]["git_commit"], r["notebooks"]
(1, 'abc', [{'name': '05_adapt', 'seconds': 12.5, 'status': 'ok'}])
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import TypedDict

__all__ = [
    "SCHEMA_VERSION",
    "KEEP",
    "Change",
    "RunInfo",
    "PageTime",
    "Record",
    "run_record",
    "read_record",
    "section",
    "measures",
    "differences",
]

SCHEMA_VERSION = 1


class Change(TypedDict, total=False):
    """One measure before -> after on the same items (:func:`azllm.evaluation.compare.difference`): ``task`` or
    ``measure`` names it; ``verdict`` is "gain", "loss", "within noise" or "no error estimate"; ``mde`` the
    minimum detectable effect at 80% power; ``chance`` the score of a guess, where one exists."""

    task: str
    measure: str
    metric: str
    language: str
    n: int
    before: float
    before_se: float
    after: float
    after_se: float
    delta: float
    delta_se: float
    verdict: str
    mde: float
    chance: float


class RunInfo(TypedDict, total=False):
    """Where a record came from."""

    run_name: str
    params_file: str
    git_commit: str
    params_hash: str
    time_utc: str
    machine: dict


class PageTime(TypedDict):
    """One page of the run: its notebook's name, wall seconds and status."""

    name: str
    seconds: float
    status: str


class Record(TypedDict, total=False):
    """A run's record: ``schema``, ``run``, ``notebooks``, ``artifacts`` and one dict per section of :data:`KEEP`
    that the run produced."""

    schema: int
    run: RunInfo
    notebooks: list[PageTime]
    artifacts: dict
    corpus: dict
    tokenizers: dict
    tokens_split: dict
    tokens_benchmark: dict
    train: dict
    benchmark: dict
    adapt: dict
    evaluate: dict
    sft: dict
    preference: dict
    distill: dict
    deploy: dict


KEEP: dict[str, tuple[str, ...]] = {
    "corpus": ("sizes", "mix", "counts", "performance", "decontamination_hits", "sentence_filter"),
    "tokenizers": (
        "recipe",
        "table",
        "best",
        "best_fertility_by_set",
        "reference_fertility",
        "fertility_target",
        "lexicon",
        "one_at_a_time",
        "sample_leakage",
    ),
    "tokens_split": ("train_tokens", "val_tokens", "train_docs", "val_docs", "dtype", "val_share_of_docs"),
    "tokens_benchmark": ("ratios",),
    "train": ("source", "method", "main_steps", "main_parameters", "final", "tokens_per_s", "peak_rss_mb"),
    "benchmark": (
        "device",
        "batch",
        "seq",
        "variants",
        "predicted_vs_measured",
        "fastest_variant",
        "cost",
        "cheapest_variant",
        "seconds",
    ),
    "adapt": ("runs", "steps", "genres", "best", "one_more_hour"),
    "evaluate": ("before_after", "power", "z", "top", "moved", "az_headline", "en_headline"),
    "sft": ("chrf_before_after", "tasks_before_after", "main", "stages", "decoding"),
    "preference": (
        "method",
        "train_method",
        "sft_weight",
        "steps",
        "judgement",
        "tasks_before_after",
        "against_original",
        "pairs",
    ),
    "distill": ("bpb", "models"),
    "deploy": ("summary", "parity", "files", "speed"),
}
"""What the record keeps of each section of ``metrics.json``: every key a renderer reads, nothing else (the
pages' own detail stays in ``metrics.json``)."""


# What a record keeps of the machine (azllm.utils.machine_info): enough to tell two machines' numbers apart (the same
# params on another CPU differ in the last digits), no host name. "cpu" and "gpu" are older records' names.
MACHINE_KEYS = ("processor", "cpu", "cpu_count", "memory_gb", "gpus", "gpu", "cuda_version", "platform", "python")


def run_record(doc: dict) -> Record:
    """The record of a ``metrics.json`` document (``{"run", "metrics", "notebooks", "artifacts"}``)."""
    m, run = doc["metrics"], doc["run"]
    mach = run.get("machine") or {}
    out: Record = {
        "schema": SCHEMA_VERSION,
        "run": {
            **{k: run.get(k) for k in ("run_name", "params_file", "git_commit", "params_hash", "time_utc")},
            "machine": {k: mach.get(k) for k in MACHINE_KEYS if k in mach},
        },
        "notebooks": [{k: n.get(k) for k in ("name", "seconds", "status")} for n in doc.get("notebooks") or []],
        "artifacts": doc.get("artifacts") or {},
    }
    for name, keys in KEEP.items():
        if m.get(name):
            out[name] = {k: m[name][k] for k in keys if k in m[name]}
    table = (out.get("tokenizers") or {}).get("table")
    if table:
        cols = ("tokenizer", "eval_set", "vocab_size", "fertility", "roundtrip")
        out["tokenizers"]["table"] = [{k: r[k] for k in cols if k in r} for r in table]
    lex = (out.get("tokenizers") or {}).get("lexicon")
    if lex:
        out["tokenizers"]["lexicon"] = {
            k: {f: v[f] for f in ("n", "recall", "precision") if f in v} for k, v in lex.items() if isinstance(v, dict)
        }
    return out


def read_record(path: str | os.PathLike) -> Record:
    """The record of ``path``: a run folder (its ``metrics.json``), a ``metrics.json``, or a record file (read as
    it is; no ``schema`` is version 1). A record of a newer schema than this azllm reads is refused."""
    p = Path(path)
    doc = json.loads((p / "metrics.json" if p.is_dir() else p).read_text(encoding="utf-8"))
    if "metrics" in doc:
        return run_record(doc)
    version = doc.setdefault("schema", 1)
    if version > SCHEMA_VERSION:
        raise ValueError(f"{p}: a record of schema {version}; this azllm reads up to {SCHEMA_VERSION}: upgrade azllm")
    return doc


def section(rec: Record, name: str) -> dict:
    """The section ``name`` of a record, or ``{}`` when the run did not produce it.

    >>> section({"sft": {"stages": []}}, "sft"), section({}, "deploy")
    ({'stages': []}, {})
    """
    return rec.get(name) or {}


# What two runs of the same params may differ in without being different results: the run's facts, its pages' times,
# its artifacts' paths, what is read off the clock or the memory (speed ratios and costs, the fastest variant, gains per
# device-hour, the forecast of one more hour of the machine's own steps), and (by leaf name) wall times, speeds,
# memory, the machine's load and worker count.
NOT_RESULTS = (
    "schema",
    "run",
    "notebooks",
    "artifacts",
    "tokens_benchmark.ratios",
    "benchmark.cost",
    "benchmark.cheapest_variant",
    "benchmark.fastest_variant",
    "evaluate.top.device_hours",
    "evaluate.top.az_gain_per_device_hour",
    "adapt.one_more_hour",
)
MACHINE_BOUND = re.compile(
    r"(seconds|\w+_s|load|workers|speed_ratio|memory_ratio|hours_for_\w+|mb_per_s\w*|\w*tokens_per_s\w*"
    r"|step_ms_\w+|peak_\w+|\w*rss\w*|measured_\w+|predicted_over_measured)"
)
ROW_NAMES = ("task", "measure", "name", "tokenizer", "eval_set", "way", "method", "metric", "language")


def measures(rec: Record) -> dict[str, object]:
    """Every result of a record as ``{dotted key: value}``: :data:`NOT_RESULTS` sections and the leaves
    :data:`MACHINE_BOUND` names left out; a list of rows is keyed by what names each row (:data:`ROW_NAMES`), so
    that two records list them in any order.

    >>> rows = [{"task": "t", "after": 0.5}]
    >>> measures({"run": {"git_commit": "a"}, "train": {"wall_s": 9.0, "bpb": 1.5}, "evaluate": {"rows": rows}})
    {'train.bpb': 1.5, 'evaluate.rows.t.task': 't', 'evaluate.rows.t.after': 0.5}
    """

    def rows(v: list) -> list[str] | None:
        names = ["/".join(str(r[k]) for k in ROW_NAMES if k in r) if isinstance(r, dict) else "" for r in v]
        return names if all(names) and len(set(names)) == len(names) else None

    def walk(v: object, key: str):
        if isinstance(v, dict):
            for k, x in v.items():
                if not MACHINE_BOUND.fullmatch(str(k)) and f"{key}.{k}".lstrip(".") not in NOT_RESULTS:
                    yield from walk(x, f"{key}.{k}".lstrip("."))
        elif isinstance(v, list):
            for name, x in zip(rows(v) or map(str, range(len(v))), v):
                yield from walk(x, f"{key}.{name}")
        else:
            yield key, v

    return dict(walk(rec, ""))


def differences(run: Record, reference: Record, *, rel_tol: float = 1e-6) -> list[tuple[str, object, object]]:
    """``(key, run's value, reference's value)`` for every result of ``reference`` (:func:`measures`) that ``run``
    lacks or holds otherwise: numbers equal within ``rel_tol`` of the larger (an absolute ``rel_tol`` below 1),
    anything else exactly. A result only ``run`` holds (a field added to the record since), or one the reference
    leaves None, is not a difference.

    >>> ref = {"train": {"final": {"val_bpb": 1.5, "wall_s": 9.0}, "method": "full"}}
    >>> differences({"train": {"final": {"val_bpb": 1.5000001, "wall_s": 7.0}, "method": "full"}}, ref)
    []
    >>> differences({"train": {"final": {"val_bpb": 1.5001}}}, ref)
    [('train.final.val_bpb', 1.5001, 1.5), ('train.method', '<missing>', 'full')]
    """
    mine, theirs = measures(run), measures(reference)
    out = []
    for k, want in theirs.items():
        got = mine.get(k, "<missing>")
        if want is None:  # a value the reference's run could not give (a chance level before azllm knew it)
            continue
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (got, want)):
            same = math.isclose(got, want, rel_tol=rel_tol, abs_tol=rel_tol) or math.isnan(got) and math.isnan(want)
        else:
            same = got == want
        if not same:
            out.append((k, got, want))
    return out
