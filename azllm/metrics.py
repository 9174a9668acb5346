"""Tokenizer metrics: how many tokens a tokenizer spends on Azerbaijani, and where it cuts words.

Definitions (``lines`` are stripped, non-empty, normalized lines; counts never include special tokens):

- ``fertility``: tokens per whitespace word (:func:`azllm.text.whitespace_words`), the measure of the published
  FLORES reference numbers (GPT-2 about 4.9, Llama-3 about 3.4 on azj_Latn).
- ``continued_words``: share of whitespace words that take 2 or more tokens when encoded as they appear in
  running text (see :func:`word_prefix`).
- ``chars_per_token`` / ``bytes_per_token``: characters / UTF-8 bytes of the lines per token.
- ``unk_rate``: share of tokens that are the unknown token; ``byte_fallback_rate``: share that are byte-fallback
  pieces (``<0xNN>``); ``fallback_rate`` their sum. Byte-level BPE tokenizers (GPT-2, Llama-3, tiktoken) have
  neither by construction.
- ``vocab_used``: share of the vocabulary that occurs in the encoded lines.
- ``parity``: on line-parallel text, total tokens of the Azerbaijani side / total tokens of the English side.
- ``roundtrip``: share of lines with ``decode(encode(x)) == x``.
- ``morph_recall`` / ``morph_precision``: on alphabetic words where :mod:`azllm.morph` predicts suffix
  boundaries, the share of predicted boundaries that are token boundaries (recall), and the share of
  word-internal token boundaries that are predicted boundaries (precision).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain
from pathlib import Path

from .morph import suffix_boundaries
from .text import alpha_words, normalize

__all__ = [
    "tokenizer_metrics",
    "word_prefix",
    "token_boundaries",
    "morph_alignment",
    "roundtrip_failures",
    "pieces",
    "evaluate",
    "best_variant",
    "segmentations",
    "affix_comparison",
    "export_checks",
    "normalized_away",
    "hf_id_mismatches",
    "is_tie",
]

_CALIBRATION = ["evlərimizdən", "Azərbaycan", "kitablar", "universitetində", "gəldik", "və", "Bakı", "təhsil"]


def word_prefix(tok) -> str:
    """How a word must be encoded alone to get the tokens it gets in running text: ``""`` or ``" "``.

    SentencePiece models with a dummy prefix encode ``"ev"`` as they encode ``" ev"`` inside a sentence; byte-level
    BPE (GPT-2, Llama-3) needs the leading space (``"Ġev"``); Llama-2's SentencePiece model does not strip a
    leading space, so there ``""`` is right. Decided empirically on a few words, per tokenizer.
    """
    scores = {}
    for prefix in ("", " "):
        hits = 0
        for w in _CALIBRATION:
            alone = tok.encode(prefix + w)
            ctx = tok.encode("bu " + w)
            hits += len(alone) <= len(ctx) and ctx[len(ctx) - len(alone) :] == alone
        scores[prefix] = hits
    return " " if scores[" "] > scores[""] else ""


def token_boundaries(tok, ids: Sequence[int], word: str) -> set[int]:
    """Character offsets inside ``word`` where one of its tokens ends and the next begins.

    Found by decoding growing prefixes of the word's ids; a byte-level token that ends inside a multi-byte
    character counts as ending after that character.
    """
    cuts = set()
    for k in range(1, len(ids)):
        n = len(tok.decode(list(ids[:k])).lstrip(" "))
        if 0 < n < len(word):
            cuts.add(n)
    return cuts


def morph_alignment(tok, words: Counter, prefix: str | None = None) -> dict:
    """Boundary recall and precision against the suffix boundaries of :mod:`azllm.morph` (count-weighted)."""
    prefix = word_prefix(tok) if prefix is None else prefix
    cand = [(w, suffix_boundaries(w)) for w in words]
    cand = [(w, b) for w, b in cand if b]
    if not cand:
        return {"morph_recall": None, "morph_precision": None, "morph_words": 0}
    encs = tok.encode_batch([prefix + w for w, _ in cand])
    hit = pred = internal = 0
    for (w, b), ids in zip(cand, encs):
        c = words[w]
        tb = token_boundaries(tok, ids, w)
        hit += c * len(tb & set(b))
        pred += c * len(b)
        internal += c * len(tb)
    return {
        "morph_recall": hit / pred,
        "morph_precision": (hit / internal) if internal else None,
        "morph_words": sum(words[w] for w, _ in cand),
    }


def roundtrip_failures(tok, lines: Iterable[str], limit: int = 5) -> tuple[int, list[tuple[str, str]]]:
    """Number of lines where ``decode(encode(x)) != x``, with up to ``limit`` examples."""
    lines = [ln for ln in lines if ln]
    bad, examples = 0, []
    for ln, ids in zip(lines, tok.encode_batch(lines)):
        back = tok.decode(ids)
        if back != ln:
            bad += 1
            if len(examples) < limit:
                examples.append((ln, back))
    return bad, examples


def tokenizer_metrics(
    tok, lines: Iterable[str], parallel_lines: Iterable[str] | None = None, *, morph: bool = True
) -> dict:
    """All metrics of the module docstring for one tokenizer on one set of lines.

    ``parallel_lines`` are the English lines, aligned with ``lines``, for ``parity``.

    >>> m = tokenizer_metrics(load_tokenizer("tiktoken:gpt2"), ["Salam, dünya!"])  # doctest: +SKIP
    >>> m["fertility"]  # doctest: +SKIP
    3.5
    """
    lines = [ln.strip() for ln in lines]
    keep = [i for i, ln in enumerate(lines) if ln]
    az = [lines[i] for i in keep]
    if not az:
        raise ValueError("tokenizer_metrics: no non-empty line to measure")
    enc = tok.encode_batch(az)
    n_tok = sum(len(e) for e in enc)
    words = Counter(chain.from_iterable(ln.split() for ln in az))
    n_words = sum(words.values())
    n_chars = sum(len(ln) for ln in az)
    n_bytes = sum(len(ln.encode("utf-8")) for ln in az)
    all_ids = list(chain.from_iterable(enc))
    n_fallback = sum(1 for i in all_ids if i in tok.fallback_ids)
    n_unk = sum(1 for i in all_ids if i == tok.unk_id) if tok.unk_id is not None else 0
    prefix = word_prefix(tok)
    uniq = list(words)
    wenc = tok.encode_batch([prefix + w for w in uniq])
    continued = sum(words[w] for w, e in zip(uniq, wenc) if len(e) >= 2)
    bad = sum(1 for ln, ids in zip(az, enc) if tok.decode(ids) != ln)
    out = {
        "lines": len(az),
        "words": n_words,
        "tokens": n_tok,
        "fertility": n_tok / n_words,
        "continued_words": continued / n_words,
        "chars_per_token": n_chars / n_tok,
        "bytes_per_token": n_bytes / n_tok,
        "unk_rate": n_unk / n_tok,
        "byte_fallback_rate": (n_fallback - n_unk) / n_tok,
        "fallback_rate": n_fallback / n_tok,
        "vocab_used": len(set(all_ids)) / tok.vocab_size,
        "roundtrip": 1 - bad / len(az),
    }
    if parallel_lines is not None:
        en = [ln.strip() for ln in parallel_lines]
        if len(en) != len(lines):
            raise ValueError(f"parallel lines: {len(lines)} Azerbaijani lines but {len(en)} English lines")
        en = [en[i] for i in keep]
        en_tok = sum(len(e) for e in tok.encode_batch(en))
        out["parity"] = n_tok / en_tok
    if morph:
        aw = Counter(chain.from_iterable(alpha_words(ln) for ln in az))
        out.update(morph_alignment(tok, aw, prefix))
    return out


def pieces(tok, ids: Sequence[int]) -> list[str]:
    """Readable text of each token: its piece where the backend has one, else its decoded text."""
    fn = getattr(tok, "id_to_piece", None)
    out = []
    for i in ids:
        p = fn(i) if fn else None
        if p is None:
            p = tok.decode([i])
        out.append(p)
    return out


def evaluate(
    tokenizers: dict,
    eval_sets: dict[str, list[str]],
    parallel: dict[str, tuple[list[str], list[str]]] | None = None,
    progress: bool = True,
) -> list[dict]:
    """Metrics for every tokenizer on every eval set: one row per (tokenizer, eval set).

    A parallel pair named like an eval set adds ``parity`` to that set's row; other pairs get their own rows.
    """
    from .utils import progress as progress_bar

    parallel = parallel or {}
    rows = []
    jobs = [(tn, en) for tn in tokenizers for en in eval_sets]
    jobs += [(tn, pn) for tn in tokenizers for pn in parallel if pn not in eval_sets]
    for tn, en in progress_bar(jobs, desc="metrics", disable=not progress):
        if en in eval_sets:
            lines = eval_sets[en]
            en_lines = parallel[en][1] if en in parallel else None
        else:
            lines, en_lines = parallel[en]
        m = tokenizer_metrics(tokenizers[tn], lines, en_lines)
        rows.append({"tokenizer": tn, "eval_set": en, "vocab_size": tokenizers[tn].vocab_size, **m})
    return rows


def best_variant(
    rows: list[dict],
    eval_set: str,
    vocab_size: int | None = None,
    among: set[str] | None = None,
    metric: str = "fertility",
) -> dict:
    """The row with the lowest ``metric`` on ``eval_set`` (optionally at one vocabulary size, among some names)
    whose round trip is lossless on that set."""
    cands = [
        r
        for r in rows
        if r["eval_set"] == eval_set
        and r["roundtrip"] == 1.0
        and (vocab_size is None or r.get("vocab_size") == vocab_size)
        and (among is None or r["tokenizer"] in among)
    ]
    if not cands:
        raise ValueError(f"no lossless tokenizer on {eval_set!r} at vocab size {vocab_size}")
    return min(cands, key=lambda r: r[metric])


def segmentations(tokenizers: dict, words: list[str]) -> dict[str, dict[str, str]]:
    """``{word: {tokenizer: "piece · piece · ..."}}``: how each tokenizer cuts each word (in running text)."""
    out: dict[str, dict[str, str]] = {}
    for w in words:
        out[w] = {}
        for name, tok in tokenizers.items():
            ids = tok.encode(word_prefix(tok) + w)
            out[w][name] = (
                " · ".join(p.replace("▁", "_").replace("Ġ", "_") for p in pieces(tok, ids)) + f"  ({len(ids)})"
            )
    return out


def affix_comparison(rows: list[dict], eval_set: str, names: Iterable[str]) -> list[dict]:
    """For every variant that was trained with and without the affix pre-split (``X`` and ``X-affix``), the
    fertility and morph alignment of both on ``eval_set``: what the pre-split buys and what it costs."""
    by = {r["tokenizer"]: r for r in rows if r["eval_set"] == eval_set}
    out = []
    for name in names:
        if name.endswith("-affix") or name + "-affix" not in by or name not in by:
            continue
        a, b = by[name], by[name + "-affix"]
        out.append(
            {
                "variant": name,
                "fertility": a["fertility"],
                "fertility_affix": b["fertility"],
                "morph_recall": a["morph_recall"],
                "morph_recall_affix": b["morph_recall"],
                "morph_precision": a["morph_precision"],
                "morph_precision_affix": b["morph_precision"],
            }
        )
    return out


def export_checks(tok, folder, sets: dict[str, list[str]]) -> dict[str, dict]:
    """Per set of lines: lossless round trip failures of ``tok``, id mismatches of the Hugging Face export in
    ``folder`` (see :func:`hf_id_mismatches`), and the lines that normalizing would change
    (:func:`normalized_away`: 0 on lines normalized already)."""
    return {
        name: {
            "lines": len(lines),
            "roundtrip_failures": roundtrip_failures(tok, lines)[0],
            "hf_id_mismatches": hf_id_mismatches(folder, lines),
            **normalized_away(lines),
        }
        for name, lines in sets.items()
    }


def normalized_away(lines: Iterable[str]) -> dict[str, int]:
    """Lines that :func:`azllm.text.normalize` changes (``normalized_away``), which a pipeline that normalizes
    before encoding cannot give back, and of those the lines where only whitespace changes (``spaces_only``).

    >>> normalized_away(["Bakı ", "Azərbaycan’ın", "ok"])
    {'normalized_away': 2, 'spaces_only': 1}
    """
    changed = spaces = 0
    for ln in lines:
        if normalize(ln) != ln:
            changed += 1
            spaces += " ".join(ln.split()) == normalize(ln)
    return {"normalized_away": changed, "spaces_only": spaces}


def hf_id_mismatches(folder: str | os.PathLike, lines: list[str], *, allow_ties: bool = False) -> int:
    """Lines where ``AutoTokenizer.from_pretrained(folder)`` (offline) gives other ids than the SentencePiece model
    ``folder/sp.model``. 0 means the exported Hugging Face tokenizer is exact on these lines.

    Known difference, unigram only: when two segmentations are permutations of the same pieces (``"000"`` as
    ``00|0`` or ``0|00``) their scores tie exactly, and SentencePiece (longer piece first) and HF ``tokenizers``
    (shorter piece first) break the tie differently. Both decode to the same text. With ``allow_ties=True`` such
    lines are not counted; any other difference still is. BPE exports have no ties.
    """
    import sentencepiece as spm
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    sp = spm.SentencePieceProcessor(model_file=str(Path(folder) / "sp.model"))
    bad = 0
    for ln in lines:
        a, b = hf.encode(ln, add_special_tokens=False), sp.encode(ln)
        if a != b and not (allow_ties and is_tie(a, b, sp)):
            bad += 1
    return bad


def is_tie(a: list[int], b: list[int], sp) -> bool:
    """Two encodings of one text that differ only by the order of pieces inside equal-score spans."""
    if sorted(a) != sorted(b) or sp.decode(a) != sp.decode(b):
        return False
    return abs(sum(sp.get_score(i) for i in a) - sum(sp.get_score(i) for i in b)) < 1e-6
