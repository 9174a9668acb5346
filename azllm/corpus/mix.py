"""Mixing: how much of each source the tokenizer and the model see.

A source's share is ``bytes ** temperature * weight``, normalized (temperature 1: as found; 0: every source
equal; weight 0 drops a source). The mixed corpus keeps the cleaned corpus' total bytes (or ``total_bytes``):
sources above their share are subsampled, sources below it are repeated, at most ``max_repeat`` times. Each
document's number of copies is decided by a hash of its id and the seed, so mixing streams (flat memory) and
repeats itself exactly; copies of a document share its hash, so they all land in the same train/val split of
:mod:`azllm.tokens`.

>>> shares({"legal": 12_000_000, "wiki": 2_000_000}, temperature=0.5)
{'legal': 0.71, 'wiki': 0.29}
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

from ..data import DataError

__all__ = ["shares", "rates", "copies", "write_mix"]


def shares(sizes: dict[str, int], *, temperature: float = 1.0, weights: dict[str, float] | None = None,
           digits: int = 2) -> dict[str, float]:
    """Each source's share of the mix (rounded to ``digits`` for display; :func:`rates` uses exact values)."""
    raw = _raw_shares(sizes, temperature, weights or {})
    return {k: round(v, digits) for k, v in raw.items()}


def _raw_shares(sizes: dict[str, int], temperature: float, weights: dict[str, float]) -> dict[str, float]:
    unknown = sorted(set(weights) - set(sizes))
    if unknown:
        raise DataError(f"corpus.mix.weights names unknown source(s) {unknown}; the sources are {sorted(sizes)}")
    if temperature < 0:
        raise DataError(f"corpus.mix.temperature must be >= 0, got {temperature}")
    w = {k: (b ** temperature if b > 0 else 0.0) * weights.get(k, 1.0) for k, b in sizes.items()}
    total = sum(w.values())
    if total <= 0:
        raise DataError("corpus.mix: every source has weight 0 or no text")
    return {k: v / total for k, v in w.items()}


def rates(sizes: dict[str, int], *, temperature: float = 1.0, weights: dict[str, float] | None = None,
          total_bytes: int | None = None, max_repeat: float = 4.0) -> dict[str, float]:
    """Expected copies of each document of a source (below 1: subsampled; capped at ``max_repeat``).

    >>> {k: round(v, 3) for k, v in rates({"legal": 12_000_000, "wiki": 2_000_000}, temperature=0.5).items()}
    {'legal': 0.828, 'wiki': 2.029}
    """
    total = total_bytes if total_bytes is not None else sum(sizes.values())
    sh = _raw_shares(sizes, temperature, weights or {})
    return {k: round(min(max_repeat, total * sh[k] / b), 9) if b > 0 else 0.0 for k, b in sizes.items()}


def copies(doc_id: str, rate: float, seed: int) -> int:
    """How many copies of one document go into the mix: ``floor(rate)``, plus one with probability
    ``rate - floor(rate)`` decided by a hash of ``doc_id`` and ``seed``.

    >>> copies("wiki/7", 2.0, 0), copies("wiki/7", 0.0, 0)
    (2, 0)
    """
    whole = math.floor(rate)
    h = hashlib.blake2b(f"{seed}:{doc_id}".encode(), digest_size=8).digest()
    u = int.from_bytes(h, "big") / 2 ** 64
    return whole + (1 if u < rate - whole else 0)


def write_mix(records, path: str | os.PathLike, source_rates: dict[str, float], seed: int) -> dict:
    """Write the mixed corpus (``{"text", "source"}`` jsonl) atomically; returns bytes and documents per source.

    ``records`` are the cleaned corpus' records (``text``, ``id``, ``metadata.source``)."""
    path = Path(path)
    counts: dict[str, dict[str, int]] = {}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for rec in records:
                src = rec["metadata"]["source"]
                k = copies(rec["id"], source_rates.get(src, 0.0), seed)
                c = counts.setdefault(src, {"docs": 0, "bytes": 0})
                c["docs"] += k
                c["bytes"] += k * len(rec["text"].encode("utf-8"))
                f.write((json.dumps({"text": rec["text"], "source": src}, ensure_ascii=False) + "\n") * k)
        if not any(c["docs"] for c in counts.values()):
            raise DataError("corpus.mix: the mix is empty (every rate is 0)")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return counts
