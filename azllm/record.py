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
import os
from pathlib import Path
from typing import TypedDict

__all__ = ["SCHEMA_VERSION", "KEEP", "Change", "RunInfo", "PageTime", "Record", "run_record", "read_record", "section"]

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
