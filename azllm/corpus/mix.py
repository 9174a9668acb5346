"""Mixing: how much of each source the tokenizer and the model see.

Three steps, in input order, streaming (flat memory):

1. **Sentence near-duplicates** (``sentence_dedup``): a sentence is dropped when at least half of its word 3-grams
   (lowercased, digit runs masked) already occurred earlier in the same source. Document-level MinHash keeps a
   document that repeats a few sentences of another (overlapping scrapes of one Wikipedia article, templated
   legal notes); this catches the repeats. The seen 3-grams live in a fixed 32 MiB Bloom filter.
2. **Shares**: a source's share is ``bytes ** temperature * weight``, normalized (temperature 1: as found; 0:
   every source equal; weight 0 drops a source), of a total (the kept sources' bytes, or ``total_bytes``):
   sources above their share are subsampled, sources below it repeated, at most ``max_repeat`` times. A
   document's number of copies is decided by a hash of its id and the seed, so the mix repeats itself exactly;
   copies of a document share its hash, so they all land in the same train/val split of :mod:`azllm.tokens`.
3. **Caps**: a capped source contributes its first ``cap`` bytes (in input order), like ``max_bytes_per_file``.

>>> shares({"legal": 12_000_000, "wiki": 2_000_000}, temperature=0.5)
{'legal': 0.71, 'wiki': 0.29}
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path

from ..data import DataError

__all__ = ["shares", "rates", "copies", "write_mix", "drop_seen_sentences", "SeenShingles", "check_names"]


def shares(
    sizes: dict[str, int], *, temperature: float = 1.0, weights: dict[str, float] | None = None, digits: int = 2
) -> dict[str, float]:
    """Each source's share of the mix (rounded to ``digits`` for display; :func:`rates` uses exact values)."""
    raw = _raw_shares(sizes, temperature, weights or {})
    return {k: round(v, digits) for k, v in raw.items()}


def check_names(named: dict, sizes: dict, what: str) -> None:
    """Every source named in ``corpus.mix.<what>`` exists."""
    unknown = sorted(set(named) - set(sizes))
    if unknown:
        raise DataError(f"corpus.mix.{what} names unknown source(s) {unknown}; the sources are {sorted(sizes)}")


def _raw_shares(sizes: dict[str, int], temperature: float, weights: dict[str, float]) -> dict[str, float]:
    check_names(weights, sizes, "weights")
    if temperature < 0:
        raise DataError(f"corpus.mix.temperature must be >= 0, got {temperature}")
    w = {k: (b**temperature if b > 0 else 0.0) * weights.get(k, 1.0) for k, b in sizes.items()}
    total = sum(w.values())
    if total <= 0:
        raise DataError("corpus.mix: every source has weight 0 or no text")
    return {k: v / total for k, v in w.items()}


def rates(
    sizes: dict[str, int],
    *,
    temperature: float = 1.0,
    weights: dict[str, float] | None = None,
    total_bytes: int | None = None,
    max_repeat: float = 4.0,
) -> dict[str, float]:
    """Expected copies of each document of a source (below 1: subsampled; capped at ``max_repeat``).

    The total is ``total_bytes``, or None: the bytes of the sources whose weight is not 0 (so temperature 1 with
    weights of 0 and 1 keeps every other source whole).

    >>> {k: round(v, 3) for k, v in rates({"legal": 12_000_000, "wiki": 2_000_000}, temperature=0.5).items()}
    {'legal': 0.828, 'wiki': 2.029}
    >>> rates({"legal": 12_000_000, "wiki": 2_000_000}, weights={"legal": 0})
    {'legal': 0.0, 'wiki': 1.0}
    """
    weights = weights or {}
    sh = _raw_shares(sizes, temperature, weights)
    total = total_bytes if total_bytes is not None else sum(b for k, b in sizes.items() if weights.get(k, 1.0) > 0)
    return {k: round(min(max_repeat, total * sh[k] / b), 9) if b > 0 else 0.0 for k, b in sizes.items()}


def copies(doc_id: str, rate: float, seed: int) -> int:
    """How many copies of one document go into the mix: ``floor(rate)``, plus one with probability
    ``rate - floor(rate)`` decided by a hash of ``doc_id`` and ``seed``.

    >>> copies("wiki/7", 2.0, 0), copies("wiki/7", 0.0, 0)
    (2, 0)
    """
    whole = math.floor(rate)
    h = hashlib.blake2b(f"{seed}:{doc_id}".encode(), digest_size=8).digest()
    u = int.from_bytes(h, "big") / 2**64
    return whole + (1 if u < rate - whole else 0)


class SeenShingles:
    """A Bloom filter of hashed word 3-grams (``bits`` bits, two probes): flat memory at any corpus size.

    >>> seen = SeenShingles(bits=1 << 16)
    >>> seen.add_and_share(["a b c", "b c d"]), seen.add_and_share(["b c d", "x y z"])
    (0.0, 0.5)
    """

    def __init__(self, bits: int = 1 << 28):
        import numpy as np

        self.bits = bits
        self.array = np.zeros(bits // 8, dtype=np.uint8)

    def add_and_share(self, keys: list[str]) -> float:
        """Share of ``keys`` seen before; then remember them all."""
        hits = 0
        for k in keys:
            h = int.from_bytes(hashlib.blake2b(k.encode(), digest_size=8).digest(), "big")
            probes = (h % self.bits, (h >> 32) % self.bits)
            if all(self.array[p >> 3] >> (p & 7) & 1 for p in probes):
                hits += 1
            for p in probes:
                self.array[p >> 3] |= 1 << (p & 7)
        return hits / len(keys) if keys else 0.0


_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_DIGITS = re.compile(r"\d+")


def drop_seen_sentences(text: str, seen: SeenShingles, prefix: str = "", threshold: float = 0.5) -> str:
    """``text`` without the sentences whose word 3-grams were mostly seen before (``prefix`` scopes the keys,
    e.g. to a source).

    >>> seen = SeenShingles(bits=1 << 16)
    >>> drop_seen_sentences("Bakı böyük şəhərdir. Hava isti olacaq.", seen)
    'Bakı böyük şəhərdir. Hava isti olacaq.'
    >>> drop_seen_sentences("Sabah hava isti olacaq. Bakı 2025-ci ildə böyük şəhərdir.", seen)
    'Bakı 2025-ci ildə böyük şəhərdir.'
    """
    keep = []
    for sentence in _SENTENCE.split(text):
        w = _DIGITS.sub("0", sentence.lower()).split()
        grams = [" ".join(w)] if len(w) < 3 else [" ".join(w[i : i + 3]) for i in range(len(w) - 2)]
        if seen.add_and_share([prefix + g for g in grams]) < threshold:
            keep.append(sentence)
    return " ".join(keep)


def write_mix(
    records,
    path: str | os.PathLike,
    *,
    source_rates: dict[str, float],
    caps: dict[str, int],
    sentence_dedup: bool,
    seed: int,
) -> dict:
    """Write the mixed corpus (``{"text", "source"}`` jsonl) atomically: the three steps of the module docstring
    over ``records`` (the cleaned corpus' records in input order). Returns ``{source: {docs, bytes}}``."""
    path = Path(path)
    counts: dict[str, dict[str, int]] = {}
    seen = SeenShingles() if sentence_dedup else None
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for rec in records:
                src = rec["metadata"]["source"]
                c = counts.setdefault(src, {"docs": 0, "bytes": 0, "full": False})
                text = drop_seen_sentences(rec["text"], seen, src + "\x1f") if seen is not None else rec["text"]
                k = copies(rec["id"], source_rates.get(src, 0.0), seed) if text else 0
                b = k * len(text.encode("utf-8"))
                if k == 0 or c["full"] or (src in caps and c["bytes"] + b > caps[src]):
                    c["full"] = c["full"] or (k > 0 and src in caps)
                    continue
                c["docs"] += k
                c["bytes"] += b
                f.write((json.dumps({"text": text, "source": src}, ensure_ascii=False) + "\n") * k)
        if not any(c["docs"] for c in counts.values()):
            raise DataError("corpus.mix: the mix is empty (every rate is 0)")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return {k: {"docs": v["docs"], "bytes": v["bytes"]} for k, v in counts.items()}
