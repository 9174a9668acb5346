"""Decontamination: training documents that share a long word n-gram with an evaluation line.

A document is contaminated when it shares any word ``n``-gram with an evaluation line (``n = 13`` by default, the
GPT-3 / Llama-2 choice), after
:func:`ngram_words`' normalization (lowercase, punctuation dropped, digits kept). An evaluation line shorter than
``n`` words is matched whole when it has at least ``min_words`` words (short FLORES/X-WMT lines otherwise could
never match). Use :func:`find_contamination` on your own held-out set:

>>> index = eval_index(["Bakı Azərbaycanın paytaxtı və ən böyük şəhəridir."], n=13, min_words=5)
>>> find_contamination(["Məlumdur ki, Bakı Azərbaycanın paytaxtı və ən böyük şəhəridir!"], index)
[(0, 0)]
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from ..text import az_lower

__all__ = ["ngram_words", "eval_index", "contaminated_by", "find_contamination", "hits_by_set", "EvalIndex"]

_WORD = re.compile(r"\w+")


def ngram_words(text: str) -> list[str]:
    """The words n-grams are made of: Azerbaijani lowercase, punctuation dropped.

    >>> ngram_words("İlham, BAKI-ya gəldi!")
    ['ilham', 'bakı', 'ya', 'gəldi']
    """
    return _WORD.findall(az_lower(text))


def _key(words) -> bytes:
    """A stable 8-byte hash of a word sequence (the same in every process, unlike ``hash``)."""
    return hashlib.blake2b("\x1f".join(words).encode(), digest_size=8).digest()


class EvalIndex:
    """Hashes of the evaluation lines' n-grams, each mapped to the first line that holds it."""

    def __init__(self, n: int, min_words: int):
        self.n, self.min_words = n, min_words
        self.grams: dict[bytes, int] = {}
        self.short: dict[bytes, int] = {}  # key of a whole short line -> its line
        self.lengths: set[int] = set()

    def add(self, line_no: int, text: str) -> None:
        """Index one evaluation line."""
        w = ngram_words(text)
        if len(w) >= self.n:
            for i in range(len(w) - self.n + 1):
                self.grams.setdefault(_key(w[i : i + self.n]), line_no)
        elif len(w) >= self.min_words:
            self.short.setdefault(_key(w), line_no)
            self.lengths.add(len(w))


def eval_index(lines: Iterable[str], *, n: int = 13, min_words: int = 8) -> EvalIndex:
    """An :class:`EvalIndex` of evaluation lines (their order numbers are what hits report)."""
    idx = EvalIndex(n, min_words)
    for i, ln in enumerate(lines):
        idx.add(i, ln)
    return idx


def contaminated_by(text: str, index: EvalIndex) -> int | None:
    """The number of the first evaluation line ``text`` shares an n-gram with (or holds whole), else None."""
    w = ngram_words(text)
    n = index.n
    for i in range(len(w) - n + 1):
        hit = index.grams.get(_key(w[i : i + n]))
        if hit is not None:
            return hit
    for k in index.lengths:
        for i in range(len(w) - k + 1):
            hit = index.short.get(_key(w[i : i + k]))
            if hit is not None:
                return hit
    return None


def find_contamination(docs: Iterable[str], index: EvalIndex) -> list[tuple[int, int]]:
    """``(document number, evaluation line number)`` of every contaminated document."""
    out = []
    for d, text in enumerate(docs):
        hit = contaminated_by(text, index)
        if hit is not None:
            out.append((d, hit))
    return out


def hits_by_set(docs: Iterable[str], sets: dict[str, list[str]], *, n: int = 13, min_words: int = 8) -> dict[str, int]:
    """How many of ``docs`` each evaluation set would remove on its own (a document that shares n-grams with two
    sets counts for both, unlike the corpus stage, which records the first hit).

    >>> hits_by_set(["a b c d e f g h i", "x y z"], {"s1": ["a b c d e f g h i"], "s2": ["q r s t u v w x y"]},
    ...             n=13, min_words=8)
    {'s1': 1, 's2': 0}
    """
    index = {name: eval_index(lines, n=n, min_words=min_words) for name, lines in sets.items()}
    lengths = sorted(set().union(*(i.lengths for i in index.values()))) if index else []
    counts = dict.fromkeys(sets, 0)
    for text in docs:
        w = ngram_words(text)
        hit = set()
        for k in [n, *lengths]:
            if len(w) < k:
                continue
            keys = {_key(w[i : i + k]) for i in range(len(w) - k + 1)}
            for name, idx in index.items():
                if name not in hit and not keys.isdisjoint(idx.grams if k == n else idx.short):
                    hit.add(name)
        for name in hit:
            counts[name] += 1
    return counts
