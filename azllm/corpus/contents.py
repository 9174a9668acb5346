"""What a cleaned corpus holds, read back from its folder for the report: examples of kept and removed text,
the biggest near-duplicate clusters, the decontamination hits.

>>> examples(Path("artifacts/default/corpus/<key>"), per_reason=2)  # doctest: +SKIP
"""

from __future__ import annotations

import random
from collections import defaultdict
from itertools import islice
from pathlib import Path

from .pipeline import STEPS, read_jsonl

__all__ = ["examples", "clusters", "contamination_hits", "size_counts", "read_jsonl"]


def _short(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def examples(folder: Path, *, per_reason: int = 2, kept: int = 5, seed: int = 0, scan: int = 20_000) -> list[dict]:
    """Rows ``{step, reason, source, text}``: ``per_reason`` removed documents for each step and reason, and
    ``kept`` kept ones, drawn with ``seed`` from the first ``scan`` records of each."""
    rng = random.Random(seed)
    rows = []
    for step in STEPS:
        by_reason = defaultdict(list)
        for rec in islice(read_jsonl(folder / "removed" / step), scan):
            by_reason[rec["metadata"].get("filter_reason") or step].append(rec)
        for reason, recs in sorted(by_reason.items()):
            for rec in rng.sample(recs, min(per_reason, len(recs))):
                rows.append(
                    {"step": step, "reason": reason, "source": rec["metadata"]["source"], "text": _short(rec["text"])}
                )
    clean = list(islice(read_jsonl(folder / "clean"), scan))
    rows += [
        {"step": "kept", "reason": "", "source": r["metadata"]["source"], "text": _short(r["text"])}
        for r in rng.sample(clean, min(kept, len(clean)))
    ]
    return rows


def clusters(folder: Path, *, top: int = 5, show: int = 3) -> list[dict]:
    """The ``top`` biggest near-duplicate clusters: size, sources, and ``show`` of their documents."""
    members = defaultdict(list)
    for sub in ("clean", "removed/near_dedup"):
        for rec in read_jsonl(folder / sub):
            cid = rec["metadata"].get("minhash_cluster_id", -1)
            if cid != -1:
                members[cid].append(rec)
    biggest = sorted(members.values(), key=len, reverse=True)[:top]
    return [
        {
            "size": len(m),
            "sources": ", ".join(sorted({r["metadata"]["source"] for r in m})),
            "examples": [_short(r["text"], 110) for r in m[:show]],
        }
        for m in biggest
    ]


def contamination_hits(folder: Path, eval_lines: dict[str, list[str]], *, limit: int = 20) -> list[dict]:
    """The documents decontamination removed: the training text and the evaluation line it shares an n-gram with."""
    rows = []
    for rec in islice(read_jsonl(folder / "removed" / "decontamination"), limit):
        name, line = rec["metadata"]["eval_hit"].rsplit(":", 1)
        rows.append(
            {
                "source": rec["metadata"]["source"],
                "training text": _short(rec["text"]),
                "eval set": name,
                "eval line": _short(eval_lines[name][int(line)]),
            }
        )
    return rows


def size_counts(docs, tok=None, batch: int = 2000) -> dict:
    """Documents, words, MB (``mb``, 10**6 bytes) and (with a tokenizer ``tok``) tokens of ``docs``.

    >>> size_counts(["Salam dünya", "Necəsən?"])
    {'documents': 2, 'words': 3, 'mb': 2.2e-05}
    """
    out = {"documents": 0, "words": 0, "mb": 0.0}
    if tok is not None:
        out["tokens"] = 0
    buf: list[str] = []

    def flush():
        if tok is not None and buf:
            out["tokens"] += sum(len(e) for e in tok.encode_batch(buf))
        buf.clear()

    for d in docs:
        out["documents"] += 1
        out["words"] += len(d.split())
        out["mb"] += len(d.encode("utf-8")) / 1e6
        buf.append(d)
        if len(buf) >= batch:
            flush()
    flush()
    out["mb"] = round(out["mb"], 6)
    return out
