"""Answers to held-out instructions with the chat template, scored against the references with chrF++.

:func:`generate_answers` renders each held-out conversation up to its last assistant turn with the generation
prompt (:func:`azllm.sft.template.render_prompt`) and decodes greedily until the end-of-turn token (or EOS, or
``max_new_tokens``); :func:`chrf_scores` is sacrebleu's chrF++ (character 6-grams plus word bigrams,
``CHRF(word_order=2)``) of the answers against the reference answers, for the whole set and per answer.

**Repetition control.** With ``repetition_penalty`` above 1, transformers' ``RepetitionPenaltyLogitsProcessor``
divides the positive logits (multiplies the negative ones) of every token the answer already holds, the CTRL
penalty. Only the answer's own tokens count (``prompt_ignore_length`` is the padded prompt's width): the prompt's
words and its chat markers, the end-of-turn token among them, are never penalized, and a row's padding never
touches another row, so a batch gives the same answers as one prompt at a time (tested).

**Loops.** :func:`has_loop` calls an answer a loop when one word 3-gram occurs 3 times or more in it ("çox çox çox
çox çox", or a sentence said three times); :func:`loop_share` is the share of such answers.
"""

from __future__ import annotations

import re

import torch

from .template import render_prompt

__all__ = ["generate_answers", "chrf_scores", "has_loop", "loop_share"]

_WORD = re.compile(r"\w+")


@torch.no_grad()
def generate_answers(
    model,
    tokenizer,
    convs: list[dict],
    *,
    max_new_tokens: int = 96,
    stop_ids: list[int] | None = None,
    batch_size: int = 8,
    repetition_penalty: float = 1.0,
) -> list[dict]:
    """``[{"id", "prompt", "reference", "answer", "tokens", "stopped"}]``, greedy, in the order of ``convs``;
    ``stopped``: the answer ended on a stop token (``stop_ids``: the end-of-turn and EOS ids) rather than at
    ``max_new_tokens``. Prompts go ``batch_size`` at a time, left-padded (the attention mask and the position ids
    skip the padding), sorted by length so that a batch holds prompts of about one length: the same greedy tokens
    as one prompt at a time (tested), several times faster. ``repetition_penalty``: the module's repetition
    control (1.0: none)."""
    from transformers import LogitsProcessorList, RepetitionPenaltyLogitsProcessor

    if repetition_penalty <= 0:
        raise ValueError(f"repetition_penalty must be positive (1.0: none), not {repetition_penalty}")
    stop = [i for i in (stop_ids or [tokenizer.eos_token_id]) if i is not None]
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop[0]
    prompts = [render_prompt(tokenizer, c["messages"]) for c in convs]
    order = sorted(range(len(convs)), key=lambda i: len(prompts[i]))
    rows: dict[int, dict] = {}
    for start in range(0, len(order), max(1, int(batch_size))):
        chunk = order[start : start + max(1, int(batch_size))]
        width = max(len(prompts[i]) for i in chunk)
        ids = torch.full((len(chunk), width), pad, dtype=torch.long, device=device)
        mask = torch.zeros_like(ids)
        for row, i in enumerate(chunk):
            ids[row, width - len(prompts[i]) :] = torch.tensor(prompts[i], device=device)
            mask[row, width - len(prompts[i]) :] = 1
        control = (
            [RepetitionPenaltyLogitsProcessor(float(repetition_penalty), prompt_ignore_length=width)]
            if repetition_penalty != 1.0
            else []
        )
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=stop,
            pad_token_id=pad,
            logits_processor=LogitsProcessorList(control),
        )
        for row, i in enumerate(chunk):
            new = out[row, width:].tolist()
            end = next((k for k, t in enumerate(new) if t in stop), None)  # a finished row is padded after it
            stopped = end is not None
            new = new[: end + 1] if stopped else new
            text = tokenizer.decode(new[:-1] if stopped else new, skip_special_tokens=True).strip()
            c = convs[i]
            last = max(k for k, m in enumerate(c["messages"]) if m["role"] == "assistant")
            rows[i] = {
                "id": c["id"],
                "prompt": c["messages"][last - 1]["content"],
                "reference": c["messages"][last]["content"],
                "answer": text,
                "tokens": len(new),
                "stopped": stopped,
                "words": len(_WORD.findall(text)),
                "loop": has_loop(text),
            }
    model.train(was)
    return [rows[i] for i in range(len(convs))]


def chrf_scores(answers: list[str], references: list[str]) -> dict:
    """chrF++ of ``answers`` against ``references``: ``{"chrf++": corpus score, "per_answer": [...]}`` (0-100)."""
    from sacrebleu.metrics import CHRF

    if len(answers) != len(references):
        raise ValueError(f"{len(answers)} answers for {len(references)} references")
    metric = CHRF(word_order=2)
    corpus = metric.corpus_score(answers, [references]).score if answers else None
    return {"chrf++": corpus, "per_answer": [metric.sentence_score(a, [r]).score for a, r in zip(answers, references)]}


def has_loop(text: str, *, n: int = 3, times: int = 3) -> bool:
    """Whether one word ``n``-gram (lowercased ``\\w+`` words) occurs ``times`` times or more in ``text``.

    >>> has_loop("Bakı gözəl şəhərdir. Bakı gözəl şəhərdir. Bakı gözəl şəhərdir.")
    True
    >>> has_loop("çox çox çox çox"), has_loop("çox çox çox çox çox")
    (False, True)
    """
    words = _WORD.findall(text.lower())
    seen: dict[tuple, int] = {}
    for i in range(len(words) - n + 1):
        g = tuple(words[i : i + n])
        seen[g] = seen.get(g, 0) + 1
        if seen[g] >= times:
            return True
    return False


def loop_share(answers: list[str]) -> float | None:
    """The share of ``answers`` that loop (:func:`has_loop`); None for no answer.

    >>> loop_share(["a b c a b c a b c", "salam"])
    0.5
    """
    return sum(map(has_loop, answers)) / len(answers) if answers else None
