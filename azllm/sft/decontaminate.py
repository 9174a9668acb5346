"""Decontamination of instruction data: training conversations that overlap what the model is evaluated on.

A training conversation (all its turns) is dropped when it shares a word ``n``-gram with a held-out conversation
(prompt or reference answer) or with an evaluation text, or holds a whole shorter one of at least ``min_words``
words (:mod:`azllm.corpus.decontaminate`'s index and matching: Azerbaijani lowercase, punctuation dropped). Near-
duplicate prompts of the held-out split are already gone before this step: :func:`azllm.sft.clean.dedupe_prompts`
runs over all sources before the split is drawn. Every drop is counted by the set that caught it (the first one
that matches, in the order given: held-out first).
"""

from __future__ import annotations

from ..corpus.decontaminate import contaminated_by, eval_index

__all__ = ["conversation_text", "decontaminate"]


def conversation_text(conv: dict) -> str:
    """Every turn of a conversation, one per line."""
    return "\n".join(m["content"] for m in conv["messages"])


def decontaminate(
    train: list[dict], *, held_out: list[dict], eval_texts: dict[str, list[str]], n: int = 8, min_words: int = 6
) -> tuple[list[dict], dict]:
    """``(kept, counts)``: ``counts`` maps ``held_out`` and each name of ``eval_texts`` to the conversations it
    caught; ``examples`` holds the first caught conversation id per set."""
    sets = {"held_out": [t for c in held_out for t in (m["content"] for m in c["messages"])], **eval_texts}
    indexes = {name: eval_index(lines, n=n, min_words=min_words) for name, lines in sets.items()}
    counts = {name: 0 for name in sets}
    examples: dict[str, str] = {}
    kept = []
    for c in train:
        text = conversation_text(c)
        hit = next((name for name, idx in indexes.items() if contaminated_by(text, idx) is not None), None)
        if hit is None:
            kept.append(c)
        else:
            counts[hit] += 1
            examples.setdefault(hit, c["id"])
    return kept, {**counts, "examples": examples}
