"""Mixing: how much of each source the tokenizer and the model see.

Three steps, in input order, streaming (flat memory):

1. **Sentence near-duplicates** (``sentence_dedup``): a sentence is dropped when at least half of its word 3-grams
   (lowercased, digit runs masked) already occurred earlier in the same source. Document-level MinHash keeps a
   document that repeats a few sentences of another (overlapping scrapes of one Wikipedia article, templated
   legal notes); this catches the repeats. The seen 3-grams live in a Bloom filter sized from the cleaned corpus'
   bytes for a stated false-positive rate (:class:`SeenShingles`, ``corpus.mix.sentence_filter``); its measured
   rate is recorded, and past a bound the mix stops (:class:`FilterTooSmallError`) instead of dropping new text.
   What each step dropped is counted per source (sentences and bytes; subsampled and capped documents).
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

import xxhash

from ..data import DataError

__all__ = [
    "shares",
    "rates",
    "copies",
    "write_mix",
    "split_seen_sentences",
    "split_sentences",
    "sentence_3grams",
    "drop_seen_sentences",
    "expected_3grams",
    "SeenShingles",
    "FilterTooSmallError",
    "check_names",
]


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


class FilterTooSmallError(DataError):
    """The sentence filter holds more 3-grams than it was sized for: past its false-positive bound, new sentences
    would look seen and be dropped. Raised instead of losing text."""


class SeenShingles:
    """A Bloom filter of hashed word 3-grams, sized for ``expected`` distinct keys at a false-positive rate of
    ``false_positive`` (``bits = -n ln p / ln(2)^2``, ``probes = bits / n ln 2``; 1.2 bytes per key at 0.01).

    The rate it gives is measured as it fills (:attr:`false_positive_rate`: the share of set bits to the power of
    the probes, the chance that a key never added looks seen). Past ``max_false_positive`` (default twice the
    design rate, reached at about 1.2 times ``expected`` keys) :meth:`check` raises :class:`FilterTooSmallError`:
    the filter was sized for less text than it got, and going on would drop new sentences as "seen".

    >>> seen = SeenShingles(expected=1000)
    >>> seen.add_and_share(["a b c", "b c d"]), seen.add_and_share(["b c d", "x y z"])
    (0.0, 0.5)
    >>> seen.probes, seen.bits, seen.false_positive_rate < 1e-9
    (7, 9586, True)
    """

    def __init__(self, expected: int, *, false_positive: float = 0.01, max_false_positive: float | None = None):
        import numpy as np

        if not 0 < false_positive < 1:
            raise DataError(f"the sentence filter's false-positive rate must be in (0, 1), got {false_positive}")
        self.expected = max(1, int(expected))
        self.design_rate = float(false_positive)
        self.max_rate = float(max_false_positive if max_false_positive is not None else min(0.5, 2 * false_positive))
        self.bits = max(64, math.ceil(-self.expected * math.log(false_positive) / math.log(2) ** 2))
        self.probes = max(1, round(self.bits / self.expected * math.log(2)))
        self.array = np.zeros((self.bits + 7) // 8, dtype=np.uint8)
        self.set_bits = 0
        self.added = 0

    @property
    def false_positive_rate(self) -> float:
        """The chance, now, that a key never added looks seen: ``(set bits / bits) ** probes``."""
        return (self.set_bits / self.bits) ** self.probes

    def _positions(self, key: str) -> list[int]:
        """The key's bit positions (double hashing of one 128-bit XXH3 digest).

        >>> SeenShingles(expected=1000)._positions("bakı böyük şəhərdir") == SeenShingles(expected=1000).positions(
        ...     ["bakı böyük şəhərdir"]).tolist()[0]
        True
        """
        d = xxhash.xxh3_128_digest(key.encode())
        h1, h2 = int.from_bytes(d[:8], "big"), int.from_bytes(d[8:], "big") | 1
        return [(h1 + i * h2) % self.bits for i in range(self.probes)]

    def positions(self, keys: list[str]):
        """The bit positions of every key, one row each (``len(keys) x probes`` uint64), as :meth:`_positions`
        gives them: ``(h1 + i h2) mod bits == (h1 mod bits + i (h2 mod bits)) mod bits``, which stays below 2^64."""
        import numpy as np

        d = np.frombuffer(b"".join(xxhash.xxh3_128_digest(k.encode()) for k in keys), dtype=">u8").reshape(-1, 2)
        bits = np.uint64(self.bits)
        h1, h2 = d[:, 0] % bits, (d[:, 1] | np.uint64(1)) % bits
        return (h1[:, None] + np.arange(self.probes, dtype=np.uint64)[None, :] * h2[:, None]) % bits

    def share_seen(self, keys: list[str]) -> float:
        """Share of ``keys`` that look seen, without remembering them."""
        arr = self.array
        hits = sum(all(arr[p >> 3] & (1 << (p & 7)) for p in self._positions(k)) for k in keys)
        return hits / len(keys) if keys else 0.0

    def add_and_share(self, keys: list[str]) -> float:
        """Share of ``keys`` seen before; then remember them all (one key at a time: the reference for
        :meth:`add_and_share_groups`)."""
        hits = 0
        arr = self.array
        for key in keys:
            seen = True
            for p in self._positions(key):
                byte, bit = p >> 3, 1 << (p & 7)
                if not arr[byte] & bit:
                    seen = False
                    arr[byte] |= bit
                    self.set_bits += 1
            hits += seen
            self.added += 1
        return hits / len(keys) if keys else 0.0

    def add_and_share_groups(self, groups: list[list[str]]) -> list[float]:
        """:meth:`add_and_share` of each group of keys in turn (a document's sentences), computed for all groups at
        once with numpy: a key is seen when each of its bits was set before the call or by an earlier key of the
        call. Exactly the shares, set bits and count of the one-key-at-a-time loop, at a fraction of its time.

        >>> seen = SeenShingles(expected=1000)
        >>> seen.add_and_share_groups([["a b c", "b c d"], ["b c d", "x y z"], []])
        [0.0, 0.5, 0.0]
        """
        import numpy as np

        sizes = [len(g) for g in groups]
        keys = [k for g in groups for k in g]
        if not keys:
            return [0.0] * len(groups)
        pos = self.positions(keys)
        n, probes = pos.shape
        flat = pos.ravel()
        byte, mask = (flat >> np.uint64(3)).astype(np.int64), np.left_shift(1, (flat & np.uint64(7))).astype(np.uint8)
        before = (self.array[byte] & mask) != 0
        _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
        setter = (first // probes)[inverse.ravel()]  # the first key of this call that sets each entry's bit
        entry_set = before | (setter < np.repeat(np.arange(n), probes))
        hits = entry_set.reshape(n, probes).all(axis=1)
        new = ~before.reshape(-1)
        np.bitwise_or.at(self.array, byte[new], mask[new])
        self.set_bits += int((~before.reshape(-1)[first]).sum())  # distinct positions not set before
        self.added += n
        ends = np.cumsum(sizes)
        counts = np.add.reduceat(np.append(hits, False).astype(np.int64), np.r_[0, ends[:-1]]).tolist()
        return [c / size if size else 0.0 for c, size in zip(counts, sizes)]

    def check(self) -> None:
        """Raise :class:`FilterTooSmallError` when the measured rate is past the bound."""
        if self.false_positive_rate > self.max_rate:
            raise FilterTooSmallError(
                f"corpus.mix: the sentence filter was sized for {self.expected:,} word 3-grams at a false-positive "
                f"rate of {self.design_rate:g}, but after {self.added:,} 3-grams its rate is "
                f"{self.false_positive_rate:.3g}, past the bound {self.max_rate:g}: going on would drop new sentences "
                "as seen. Raise corpus.mix.sentence_filter.expected_per_byte (or set "
                "corpus.mix.sentence_dedup: false)."
            )

    def stats(self) -> dict:
        """What metrics.json records of the filter."""
        return {
            "expected_3grams": self.expected,
            "added_3grams": self.added,
            "bits": self.bits,
            "mib": round(self.bits / 8 / 2**20, 3),
            "probes": self.probes,
            "design_false_positive": self.design_rate,
            "max_false_positive": self.max_rate,
            "false_positive": self.false_positive_rate,
        }


_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_DIGITS = re.compile(r"\d+")


def split_seen_sentences(
    text: str, seen: SeenShingles, prefix: str = "", threshold: float = 0.5
) -> tuple[list[str], list[str]]:
    """``(kept, dropped)`` sentences of ``text``: a sentence is dropped when at least ``threshold`` of its word
    3-grams were seen before (``prefix`` scopes the keys, e.g. to a source).

    >>> seen = SeenShingles(expected=1000)
    >>> split_seen_sentences("Bakı böyük şəhərdir. Hava isti olacaq.", seen)
    (['Bakı böyük şəhərdir.', 'Hava isti olacaq.'], [])
    >>> split_seen_sentences("Sabah hava isti olacaq. Bakı 2025-ci ildə böyük şəhərdir.", seen)
    (['Bakı 2025-ci ildə böyük şəhərdir.'], ['Sabah hava isti olacaq.'])
    """
    keep, drop = [], []
    sentences = split_sentences(text)
    seen_shares = seen.add_and_share_groups([[prefix + g for g in sentence_3grams(s)] for s in sentences])
    for sentence, share in zip(sentences, seen_shares):
        (keep if share < threshold else drop).append(sentence)
    return keep, drop


def split_sentences(text: str) -> list[str]:
    """The sentences the sentence filter judges: ``text`` cut after ``.``, ``!``, ``?`` or ``;`` and whitespace.

    >>> split_sentences("Bakı böyükdür. Hava isti olacaq!")
    ['Bakı böyükdür.', 'Hava isti olacaq!']
    """
    return _SENTENCE.split(text)


def sentence_3grams(sentence: str) -> list[str]:
    """The keys the sentence filter remembers of a sentence: its word 3-grams, lowercased, digit runs as ``0``
    (the whole sentence when it has fewer than three words).

    >>> sentence_3grams("Bakı 2025-ci ildə böyükdür")
    ['bakı 0-ci ildə', '0-ci ildə böyükdür']
    """
    w = _DIGITS.sub("0", sentence.lower()).split()
    return [" ".join(w)] if len(w) < 3 else [" ".join(w[i : i + 3]) for i in range(len(w) - 2)]


def drop_seen_sentences(text: str, seen: SeenShingles, prefix: str = "", threshold: float = 0.5) -> str:
    """``text`` without the sentences whose word 3-grams were mostly seen before (:func:`split_seen_sentences`).

    >>> seen = SeenShingles(expected=1000)
    >>> drop_seen_sentences("Bakı böyük şəhərdir. Hava isti olacaq.", seen)
    'Bakı böyük şəhərdir. Hava isti olacaq.'
    >>> drop_seen_sentences("Sabah hava isti olacaq. Bakı 2025-ci ildə böyük şəhərdir.", seen)
    'Bakı 2025-ci ildə böyük şəhərdir.'
    """
    return " ".join(split_seen_sentences(text, seen, prefix, threshold)[0])


def expected_3grams(clean_bytes: int, per_byte: float = 0.2) -> int:
    """The sentence filter's size: one word 3-gram per ``1 / per_byte`` bytes of cleaned text (a word 3-gram starts
    at every word; measured: 0.099 per byte on the 23 MB cleaned corpus of ../shared, so 0.2 leaves twice the room).

    >>> expected_3grams(27_000_000)
    5400000
    """
    return max(1000, math.ceil(clean_bytes * per_byte))


_COUNTS = (
    "docs",
    "bytes",
    "sentences",
    "dropped_sentences",
    "dropped_sentence_bytes",
    "subsampled_docs",
    "capped_docs",
    "capped_bytes",
)


def write_mix(
    records,
    path: str | os.PathLike,
    *,
    source_rates: dict[str, float],
    caps: dict[str, int],
    sentence_filter: SeenShingles | None,
    seed: int,
) -> dict:
    """Write the mixed corpus (``{"text", "source"}`` jsonl) atomically: the three steps of the module docstring
    over ``records`` (the cleaned corpus' records in input order), with the sentence step on ``sentence_filter``
    (None: off). Stops with :class:`FilterTooSmallError` when the filter passes its bound.

    Returns per source what went in and what each step dropped: ``docs`` / ``bytes`` written (copies counted),
    ``sentences`` read, ``dropped_sentences`` / ``dropped_sentence_bytes`` (near-duplicate sentences),
    ``subsampled_docs`` (a rate below 1 gave no copy), ``capped_docs`` / ``capped_bytes`` (past a cap)."""
    path = Path(path)
    counts: dict[str, dict] = {}
    seen = sentence_filter
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for rec in records:
                src = rec["metadata"]["source"]
                c = counts.setdefault(src, {**dict.fromkeys(_COUNTS, 0), "full": False})
                text = rec["text"]
                if seen is not None:
                    kept, dropped = split_seen_sentences(text, seen, src + "\x1f")
                    seen.check()
                    text = " ".join(kept)
                    c["sentences"] += len(kept) + len(dropped)
                    c["dropped_sentences"] += len(dropped)
                    c["dropped_sentence_bytes"] += sum(len(x.encode("utf-8")) + 1 for x in dropped)
                k = copies(rec["id"], source_rates.get(src, 0.0), seed) if text else 0
                b = k * len(text.encode("utf-8"))
                if text and k == 0:
                    c["subsampled_docs"] += 1
                    continue
                if k == 0:
                    continue
                if c["full"] or (src in caps and c["bytes"] + b > caps[src]):
                    c["full"] = True
                    c["capped_docs"] += 1
                    c["capped_bytes"] += b // k
                    continue
                c["docs"] += k
                c["bytes"] += b
                f.write((json.dumps({"text": text, "source": src}, ensure_ascii=False) + "\n") * k)
        if not any(c["docs"] for c in counts.values()):
            raise DataError("corpus.mix: the mix is empty (every rate is 0)")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return {k: {n: v[n] for n in _COUNTS} for k, v in counts.items()}
