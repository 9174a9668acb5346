"""Held-out answers and their judgement, the same for every stage (SFT, the controls, preference tuning): one split
(:func:`judged`: the verdict split when the params draw one, else the held-out split), one
decoding (:func:`decoding`: greedy, ``sft.max_new_tokens``, ``sft.repetition_penalty``), one engine
(:func:`answer_engine`: :mod:`azllm.engine`), the answers scored (:func:`scored_answers`: chrF++, loops, empty
answers), a base's answers before any step (:func:`base_answers`) and a paired before -> after change
(:func:`chrf_change`, :func:`answer_change`).
"""

from __future__ import annotations

from ..config import Config
from ..sft.data import SftData
from ..sft.template import Template
from .paths import Paths

__all__ = [
    "judged",
    "decoding",
    "answer_decoding",
    "answer_engine",
    "scored_answers",
    "base_answers",
    "chrf_change",
    "answer_change",
]


def judged(data: SftData) -> list[dict]:
    """The conversations every judgement reads: the verdict split (``sft.verdict_size``), else the held-out one."""
    return data.get("verdict") or data["held_out"]


def decoding(cfg: Config) -> dict:
    """What every held-out answer is decoded with: greedy, ``sft.max_new_tokens``, ``sft.repetition_penalty``."""
    return {"greedy": True, "max_new_tokens": cfg.sft.max_new_tokens, "repetition_penalty": cfg.sft.repetition_penalty}


def answer_decoding(cfg: Config):
    """:func:`decoding` as the engine's :class:`azllm.engine.Decoding`."""
    from ..engine import Decoding

    return Decoding(max_new_tokens=cfg.sft.max_new_tokens, repetition_penalty=cfg.sft.repetition_penalty)


def answer_engine(cfg: Config, model, tokenizer, template: Template):
    """The engine every held-out answer comes from: ``model`` stopping at the template's end of turn or EOS,
    ``sft.generate_batch_size`` prompts at a time."""
    from .. import engine

    stop = [template["end_of_turn_id"], tokenizer.eos_token_id]
    return engine.torch_engine(model, tokenizer, stop_ids=stop, batch_size=cfg.sft.generate_batch_size)


def scored_answers(cfg: Config, model, tokenizer, template: Template, data: SftData) -> dict:
    """``{"rows", "chrf++", "stopped_share", "loop_share", "empty_share", "mean_words"}``: greedy answers to the
    judged instructions (:func:`judged`; ``sft.repetition_penalty``), each with its chrF++, word count and loop
    flag (an answer of no word is empty: it neither loops nor answers)."""
    from ..sft.generate import chrf_scores, generate_answers

    rows = generate_answers(answer_engine(cfg, model, tokenizer, template), judged(data), answer_decoding(cfg))
    scores = chrf_scores([r["answer"] for r in rows], [r["reference"] for r in rows])
    for r, s in zip(rows, scores["per_answer"]):
        r["chrf++"] = s
    return {
        "rows": rows,
        "chrf++": scores["chrf++"],
        "stopped_share": sum(r["stopped"] for r in rows) / len(rows) if rows else None,
        "loop_share": sum(r["loop"] for r in rows) / len(rows) if rows else None,
        "empty_share": sum(r["words"] == 0 for r in rows) / len(rows) if rows else None,
        "mean_words": sum(r["words"] for r in rows) / len(rows) if rows else None,
    }


def base_answers(cfg: Config, *, base: str, tokenizer, template: Template, data: SftData) -> dict:
    """The held-out answers of the SFT base itself, before any step, with the same chat template and decoding as
    :func:`azllm.recipes.sft.answers` (the "before" of chrF++; new template tokens get their initial rows):
    ``{"rows", "chrf++"}``, cached in ``Paths.sft`` by the base, the held-out split, the template and the
    decoding."""
    import json

    import torch

    from ..assemble import load_base
    from ..sft.template import add_token_rows
    from ..utils import atomic_write_json, json_hash, weights_id

    key = json_hash(
        {
            "base": str(base),
            "weights": weights_id(base),
            "data": data["key"],
            "template": tokenizer.chat_template,
            "decoding": decoding(cfg),
        }
    )
    path = Paths.of(cfg).sft / f"base-answers-{key}.json"
    if path.is_file():
        return json.loads(path.read_text())
    model = load_base(base, torch.float32).eval()
    add_token_rows(model, list(template["added_tokens"]))
    got = {"key": key, **scored_answers(cfg, model, tokenizer, template, data)}
    atomic_write_json(path, got)
    return got


def chrf_change(cfg: Config, before: dict, after: dict) -> dict:
    """chrF++ of the held-out answers before (:func:`base_answers`) -> after (:func:`azllm.recipes.sft.answers`)
    SFT: the corpus scores, the difference, its standard error and verdict from the paired per-answer chrF++
    differences (:func:`answer_change`; the same answers, so the base-to-base variation cancels). ``chance`` is
    the score of each instruction echoed as its answer (:func:`azllm.sft.generate.echo_chrf`)."""
    from ..sft.generate import echo_chrf

    return {
        "task": "chrF++ (held-out answers)",
        "language": "az",
        "metric": "chrf++",
        **answer_change(cfg, before, after),
        "chance": echo_chrf(after["rows"]),
    }


def answer_change(cfg: Config, before: dict, after: dict, *, measure: str = "chrf++") -> dict:
    """One per-answer measure of the same held-out answers (:func:`scored_answers`) before -> after, paired
    (:func:`azllm.evaluation.compare.difference`): ``measure`` "chrf++" (the corpus scores; higher is better),
    "loop" (the loop rate; lower is better) or "empty" (the share of answers with no word; lower is better: a loop
    rate that falls because the answers vanished is no gain). ``{"before", "after", "delta", "delta_se", "verdict",
    "mde", "n"}``."""
    from ..evaluation.compare import change_row

    total, item = {
        "chrf++": ("chrf++", lambda r: r["chrf++"]),
        "loop": ("loop_share", lambda r: r["loop"]),
        "empty": ("empty_share", lambda r: r["words"] == 0),
    }[measure]
    b = {"value": before[total], "items": [float(item(r)) for r in before["rows"]]}
    a = {"value": after[total], "items": [float(item(r)) for r in after["rows"]]}
    return change_row(b, a, z=cfg.evaluate.z, higher_is_better=measure == "chrf++")
