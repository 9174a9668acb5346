"""The scale benchmark's two library pieces: distinct Azerbaijani-like text of any size, and the growth of a cost.

**Text** (:func:`generate_text`): a seeded word-bigram Markov model of real text (:class:`WordBigrams`, fitted on
the run's own training files), written as one document per line into several source files. Every sentence it
keeps is new by the mix's own definition, checked exactly: fewer than a quarter of its word 3-grams
(:func:`azllm.corpus.mix.sentence_3grams`) occurred earlier in its source (the mix drops a sentence at half).
So whatever the pipeline loses of this text is the pipeline's loss, not a repeat in the input. Bigram counts are
flattened (``count ** 0.5``) so that rare successors come up; sentences of 4 to 60 words, documents of 4 to 40
sentences. The files are written once per (model files, size, seed) and reused: ``generated.json``, written last,
marks a complete folder.

**Growth** (:func:`growth`): ``cost = a * size ** b`` fitted in log-log space by least squares. ``b`` near 1 is
linear; the extrapolation to another size is that curve, read beyond the measurements (:func:`extrapolate`).

>>> g = growth([100, 200, 400], [10.0, 20.0, 40.0])
>>> round(g["exponent"], 3), round(extrapolate(g, 800), 1)
(1.0, 80.0)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..corpus.mix import sentence_3grams, split_sentences
from ..utils import atomic_write_json, json_hash, progress

__all__ = ["WordBigrams", "generate_text", "growth", "extrapolate", "GENERATOR_VERSION"]

GENERATOR_VERSION = 1
MARKER = "generated.json"
SOURCE_BYTES = 32 * 2**20
"""At most this much text per generated source file (the mix judges sentences within a source)."""
MAX_SEEN = 0.25
"""A generated sentence is kept when fewer than this share of its word 3-grams occurred earlier in its source."""


class WordBigrams:
    """A word-bigram Markov chain of whitespace words, sampled many chains at a time.

    >>> m = WordBigrams(["Bakı böyük şəhərdir. Gəncə qədim şəhərdir."])
    >>> len(m.vocab), m.sample(np.random.default_rng(0), lanes=2, steps=3).shape
    (5, (3, 2))
    """

    def __init__(self, texts: list[str], flatten: float = 0.5):
        words = [w for t in texts for w in t.split()]
        if len(words) < 2:
            raise ValueError("the bigram model needs at least two words of text")
        self.vocab, ids = np.unique(np.array(words, dtype=object), return_inverse=True)
        v = len(self.vocab)
        pairs, counts = np.unique(ids[:-1].astype(np.int64) * v + ids[1:], return_counts=True)
        src, self.next_word = pairs // v, pairs % v
        self.cumulative = np.cumsum(counts.astype(np.float64) ** flatten)
        self.start = np.searchsorted(src, np.arange(v))
        self.end = np.searchsorted(src, np.arange(v), side="right")

    def sample(self, rng: np.random.Generator, lanes: int, steps: int) -> np.ndarray:
        """``steps x lanes`` word ids: ``lanes`` independent chains from random words (a word without a successor
        restarts its chain at a random word)."""
        v, c = len(self.vocab), self.cumulative
        state = rng.integers(0, v, lanes)
        out = np.empty((steps, lanes), dtype=np.int64)
        for s in range(steps):
            a, b = self.start[state], self.end[state]
            lo = np.where(a > 0, c[np.maximum(a - 1, 0)], 0.0)
            hi = c[np.maximum(b - 1, 0)]
            pick = np.searchsorted(c, lo + rng.random(lanes) * (hi - lo), side="right")
            pick = np.clip(pick, a, np.maximum(b - 1, a))
            nxt = self.next_word[np.minimum(pick, len(self.next_word) - 1)]
            state = np.where(a == b, rng.integers(0, v, lanes), nxt)
            out[s] = state
        return out

    def sentences(self, rng: np.random.Generator, lanes: int = 20_000, steps: int = 256) -> Iterator[str]:
        """Whole sentences of 4 to 60 words, forever (a chain's first and last, cut, sentences are dropped)."""
        while True:
            words = self.vocab[self.sample(rng, lanes, steps)]
            for lane in range(lanes):
                for sentence in split_sentences(" ".join(words[:, lane]))[1:-1]:
                    if 4 <= sentence.count(" ") + 1 <= 60:
                        yield sentence


def _source_text(model: WordBigrams, rng: np.random.Generator, target: int, path: Path, bar) -> dict:
    """Write one source file of about ``target`` bytes of new sentences; returns its counts."""
    seen: set[int] = set()
    n_docs = n_sentences = rejected = size = 0
    doc: list[str] = []
    doc_len = int(rng.integers(4, 41))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for sentence in model.sentences(rng):
            keys = [hash(g) for g in sentence_3grams(sentence)]
            if sum(k in seen for k in keys) >= MAX_SEEN * len(keys):
                rejected += 1
                continue
            seen.update(keys)
            doc.append(sentence)
            if len(doc) < doc_len:
                continue
            line = " ".join(doc) + "\n"
            f.write(line)
            n_bytes = len(line.encode("utf-8"))
            size += n_bytes
            bar.update(n_bytes)
            n_docs += 1
            n_sentences += len(doc)
            doc, doc_len = [], int(rng.integers(4, 41))
            if size >= target:
                break
    os.replace(tmp, path)
    return {"file": path.name, "bytes": size, "docs": n_docs, "sentences": n_sentences, "rejected": rejected}


def generate_text(
    model_files: list[str | os.PathLike], out_dir: str | os.PathLike, total_bytes: int, *, seed: int = 0
) -> dict:
    """About ``total_bytes`` of distinct generated text in ``out_dir/gen_XX.txt`` (one document per line, at most
    32 MiB per file); returns the ``generated.json`` record. Reused when ``out_dir`` holds a complete one.

    >>> generate_text(["data/az/train/wiki_literature.txt"], "artifacts/gen/64M", 64 * 2**20)  # doctest: +SKIP
    {'bytes': 67108901, 'docs': 22671, 'sentences': 512871, 'files': [...], ...}
    """
    files = sorted(Path(f) for f in model_files)
    if not files:
        raise ValueError("generate_text needs at least one text file to fit its word model on")
    out_dir = Path(out_dir)
    key = json_hash(
        {"version": GENERATOR_VERSION, "model": [(f.name, f.stat().st_size) for f in files], "bytes": total_bytes}
        | {"seed": seed}
    )
    try:
        old = json.loads((out_dir / MARKER).read_text())
        if old.get("key") == key:
            return old
    except (OSError, ValueError):
        pass
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MARKER).unlink(missing_ok=True)
    for p in out_dir.glob("gen_*.txt"):
        p.unlink()
    model = WordBigrams([f.read_text(encoding="utf-8", errors="replace") for f in files])
    n_files = max(1, math.ceil(total_bytes / SOURCE_BYTES))
    rng = np.random.default_rng(seed)
    sources = []
    with progress(total=total_bytes, desc=f"generating {out_dir.name}", unit="B", unit_scale=True) as bar:
        for i in range(n_files):
            target = total_bytes // n_files + (1 if i < total_bytes % n_files else 0)
            sources.append(_source_text(model, rng, target, out_dir / f"gen_{i:02d}.txt", bar))
    record = {
        "key": key,
        "generator_version": GENERATOR_VERSION,
        "model_files": [f.name for f in files],
        "vocab": int(len(model.vocab)),
        "seed": seed,
        "bytes": sum(s["bytes"] for s in sources),
        "docs": sum(s["docs"] for s in sources),
        "sentences": sum(s["sentences"] for s in sources),
        "rejected_sentences": sum(s["rejected"] for s in sources),
        "files": sources,
    }
    atomic_write_json(out_dir / MARKER, record)
    return record


def growth(sizes: list[float], costs: list[float]) -> dict:
    """``{"exponent", "coefficient", "r2"}`` of ``cost = coefficient * size ** exponent`` (least squares on the
    logs); an exponent of 1 is linear growth. A cost that does not change fits exactly (exponent 0, r2 1).

    >>> g = growth([64.0, 256.0], [231.0, 231.0])
    >>> round(g["exponent"], 6), g["r2"]
    (0.0, 1.0)
    """
    x, y = np.log(np.asarray(sizes, float)), np.log(np.maximum(np.asarray(costs, float), 1e-12))
    if len(x) < 2 or np.ptp(x) == 0:
        raise ValueError("growth needs costs at two or more different sizes")
    b, a = np.polyfit(x, y, 1)
    fit = a + b * x
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - fit) ** 2).sum()) / ss if ss > 0 else 1.0
    return {"exponent": float(b), "coefficient": float(np.exp(a)), "r2": r2}


def extrapolate(fit: dict, size: float) -> float:
    """The cost at ``size`` on the fitted curve of :func:`growth`."""
    return fit["coefficient"] * size ** fit["exponent"]
