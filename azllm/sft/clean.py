"""Cleaning instruction conversations before training, every step counted.

- :func:`clean_conversations`: every turn normalized with :func:`azllm.text.normalize`, empty turns dropped; a
  conversation left without an assistant turn (its answer was empty) or ending on a user turn is dropped and
  counted;
- :func:`dedupe_prompts`: the prompt of a conversation is its system and user turns; exact duplicates (after
  normalization, ignoring case) and near-duplicates (Jaccard similarity of the sets of character 5-grams at or above
  ``threshold``, a row against every earlier kept row, computed as sparse products in blocks) are dropped, the first
  one kept;
- :func:`holdout_split`: a fixed held-out split of ``size`` conversations of one source, chosen by a keyed hash of the
  prompt (the same conversations for the same key, whatever else the data holds);
- :func:`apply_length_limit`: the token-length policy (``drop``, ``truncate`` or ``error``) on given lengths.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..text import az_lower, normalize
from .data import SftDataError, check_conversation

__all__ = ["clean_conversations", "prompt_text", "dedupe_prompts", "holdout_split", "apply_length_limit"]


def clean_conversations(convs: list[dict]) -> tuple[list[dict], dict]:
    """Normalized conversations without empty turns: ``(kept, counts)`` with ``empty_turns`` (turns dropped) and
    ``dropped_empty`` (conversations left with nothing to learn)."""
    kept, empty_turns, dropped = [], 0, 0
    for c in convs:
        msgs = []
        for m in c["messages"]:
            text = "\n".join(normalize(line) for line in m["content"].split("\n")).strip()  # lines kept
            if text:
                msgs.append({"role": m["role"], "content": text})
            else:
                empty_turns += 1
        if check_conversation(msgs) is not None:
            dropped += 1
            continue
        kept.append({**c, "messages": msgs})
    return kept, {"empty_turns": empty_turns, "dropped_empty": dropped}


def prompt_text(conv: dict) -> str:
    """The prompt of a conversation: its system and user turns, joined, in Azerbaijani lowercase (I -> ı, İ -> i)."""
    return az_lower("\n".join(m["content"] for m in conv["messages"] if m["role"] != "assistant"))


def dedupe_prompts(convs: list[dict], *, threshold: float = 0.8, block: int = 2048) -> tuple[list[dict], dict]:
    """Conversations with exact and near-duplicate prompts removed (module docstring): ``(kept, counts)`` with
    ``exact`` and ``near``."""
    seen, first = set(), []
    for c in convs:
        key = prompt_text(c)
        if key not in seen:
            seen.add(key)
            first.append(c)
    exact = len(convs) - len(first)
    if threshold >= 1.0 or len(first) < 2:
        return first, {"exact": exact, "near": 0}
    from sklearn.feature_extraction.text import CountVectorizer

    X = (
        CountVectorizer(analyzer="char", ngram_range=(5, 5), binary=True, lowercase=False, dtype=np.int32)
        .fit_transform([prompt_text(c) for c in first])
        .tocsr()
    )
    sizes = np.asarray(X.sum(axis=1)).ravel()
    kept = np.ones(len(first), dtype=bool)
    XT = X.T.tocsc()
    for lo in range(0, len(first), block):
        inter = (X[lo : lo + block] @ XT).tocsr()
        for r in range(inter.shape[0]):
            i = lo + r
            js = inter.indices[inter.indptr[r] : inter.indptr[r + 1]]
            vs = inter.data[inter.indptr[r] : inter.indptr[r + 1]]
            earlier = js < i
            js, vs = js[earlier], vs[earlier]
            if len(js):
                jac = vs / np.maximum(sizes[i] + sizes[js] - vs, 1)
                if np.any((jac >= threshold) & kept[js]):
                    kept[i] = False
    out = [c for c, k in zip(first, kept) if k]
    return out, {"exact": exact, "near": int((~kept).sum())}


def holdout_split(convs: list[dict], *, source: str, size: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """``(train, held_out)``: ``size`` conversations of ``source`` chosen by a keyed hash of their prompt."""
    pool = [c for c in convs if c["source"] == source]
    if size > 0 and not pool:
        raise SftDataError(
            f"the held-out source {source!r} has no conversation (sources: "
            f"{sorted({c['source'] for c in convs})}); set sft.holdout_source"
        )
    if size >= len(pool) > 0:
        raise SftDataError(
            f"sft.holdout_size {size} leaves no training conversation of {source!r} ({len(pool)} in all)"
        )

    def h(c):
        return hashlib.sha256(f"{seed}\x00{prompt_text(c)}".encode()).hexdigest()

    held = {id(c) for c in sorted(pool, key=h)[:size]}
    return [c for c in convs if id(c) not in held], [c for c in convs if id(c) in held]


def apply_length_limit(convs: list[dict], lengths: list[int], *, max_length: int, policy: str) -> tuple[list, dict]:
    """The token-length policy: conversations longer than ``max_length`` are dropped, kept for truncation
    (``truncated``: TRL cuts them at ``max_length``) or refused with an error naming the first. Returns
    ``(kept, {"too_long", "dropped_long", "truncated"})``."""
    if policy not in ("drop", "truncate", "error"):
        raise ValueError(f"length policy must be drop, truncate or error, got {policy!r}")
    long = [i for i, n in enumerate(lengths) if n > max_length]
    if long and policy == "error":
        c = convs[long[0]]
        raise SftDataError(
            f"{c['where']}: {lengths[long[0]]} tokens with the chat template > sft.max_length "
            f"{max_length} ({len(long)} conversation(s) in all). Raise sft.max_length, or set "
            "sft.length_policy: drop or truncate."
        )
    if policy == "drop":
        gone = set(long)
        return [c for i, c in enumerate(convs) if i not in gone], {
            "too_long": len(long),
            "dropped_long": len(long),
            "truncated": 0,
        }
    return list(convs), {"too_long": len(long), "dropped_long": 0, "truncated": len(long)}
