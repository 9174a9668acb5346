"""Answers to held-out instructions with the chat template, scored against the references with chrF++.

:func:`generate_answers` renders each held-out conversation up to its last assistant turn with the generation
prompt (:func:`azllm.sft.template.render_prompt`) and decodes greedily until the end-of-turn token (or EOS, or
``max_new_tokens``); :func:`chrf_scores` is sacrebleu's chrF++ (character 6-grams plus word bigrams,
``CHRF(word_order=2)``) of the answers against the reference answers, for the whole set and per answer.
"""

from __future__ import annotations

import torch

from .template import render_prompt

__all__ = ["generate_answers", "chrf_scores"]


@torch.no_grad()
def generate_answers(model, tokenizer, convs: list[dict], *, max_new_tokens: int = 96,
                     stop_ids: list[int] | None = None) -> list[dict]:
    """``[{"id", "prompt", "reference", "answer", "tokens", "stopped"}]``, greedy; ``stopped``: the answer ended
    on a stop token (``stop_ids``: the end-of-turn and EOS ids) rather than at ``max_new_tokens``."""
    stop = [i for i in (stop_ids or [tokenizer.eos_token_id]) if i is not None]
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop[0]
    rows = []
    for c in convs:
        last = max(i for i, m in enumerate(c["messages"]) if m["role"] == "assistant")
        ids = torch.tensor([render_prompt(tokenizer, c["messages"])], device=device)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False, eos_token_id=stop, pad_token_id=pad)
        new = out[0, ids.shape[1]:].tolist()
        stopped = bool(new) and new[-1] in stop
        text = tokenizer.decode(new[:-1] if stopped else new, skip_special_tokens=True).strip()
        rows.append({"id": c["id"], "prompt": c["messages"][last - 1]["content"],
                     "reference": c["messages"][last]["content"], "answer": text, "tokens": len(new),
                     "stopped": stopped})
    model.train(was)
    return rows


def chrf_scores(answers: list[str], references: list[str]) -> dict:
    """chrF++ of ``answers`` against ``references``: ``{"chrf++": corpus score, "per_answer": [...]}`` (0-100)."""
    from sacrebleu.metrics import CHRF

    if len(answers) != len(references):
        raise ValueError(f"{len(answers)} answers for {len(references)} references")
    metric = CHRF(word_order=2)
    corpus = metric.corpus_score(answers, [references]).score if answers else None
    return {"chrf++": corpus, "per_answer": [metric.sentence_score(a, [r]).score for a, r in zip(answers, references)]}
