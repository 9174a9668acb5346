"""Answers to held-out instructions, scored against the references with chrF++.

:func:`generate_answers` asks an engine (:mod:`azllm.engine`: a transformers model or a GGUF file) to answer each
held-out conversation up to its last assistant turn; :func:`chrf_scores` is sacrebleu's chrF++ (character 6-grams
plus word bigrams, ``CHRF(word_order=2)``) of the answers against the reference answers, for the whole set and per
answer. Decoding, repetition control and loop detection are the engine's.
"""

from __future__ import annotations

from ..engine import Decoding, Engine

__all__ = ["generate_answers", "chrf_scores", "echo_chrf"]


def generate_answers(engine: Engine, convs: list[dict], decoding: Decoding) -> list[dict]:
    """``[{"id", "prompt", "reference", "answer", "tokens", "stopped", "words", "loop"}]`` in the order of
    ``convs``: ``engine``'s answer to each conversation up to its last assistant turn (``prompt``: the user turn
    before it, ``reference``: that assistant turn); ``stopped``: the answer ended on a stop token rather than at
    ``max_new_tokens``."""
    done = engine.complete([c["messages"] for c in convs], decoding)
    rows = []
    for c, a in zip(convs, done):
        last = max(k for k, m in enumerate(c["messages"]) if m["role"] == "assistant")
        rows.append(
            {
                "id": c["id"],
                "prompt": c["messages"][last - 1]["content"],
                "reference": c["messages"][last]["content"],
                "answer": a["text"],
                "tokens": a["tokens"],
                "stopped": a["stopped"],
                "words": a["words"],
                "loop": a["loop"],
            }
        )
    return rows


def chrf_scores(answers: list[str], references: list[str]) -> dict:
    """chrF++ of ``answers`` against ``references``: ``{"chrf++": corpus score, "per_answer": [...]}`` (0-100)."""
    from sacrebleu.metrics import CHRF

    if len(answers) != len(references):
        raise ValueError(f"{len(answers)} answers for {len(references)} references")
    metric = CHRF(word_order=2)
    corpus = metric.corpus_score(answers, [references]).score if answers else None
    return {"chrf++": corpus, "per_answer": [metric.sentence_score(a, [r]).score for a, r in zip(answers, references)]}


def echo_chrf(rows: list[dict]) -> float | None:
    """Corpus chrF++ of each row's ``prompt`` (the instruction) echoed as its answer, against its ``reference``:
    the score of a model that only repeats the question (:func:`generate_answers`'s rows; None for none).

    >>> round(echo_chrf([{"prompt": "Nizami Gəncəvi kimdir?", "reference": "Nizami Gəncəvi böyük şairdir."}]), 2)
    47.7
    """
    if not rows:
        return None
    return chrf_scores([r["prompt"] for r in rows], [r["reference"] for r in rows])["chrf++"]
