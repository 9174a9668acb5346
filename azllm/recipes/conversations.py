"""The SFT stage's conversations (notebook 07, ``azllm sft``, and every stage that judges on them): every
``sft.sources`` entry read (:mod:`azllm.sft.data`), cleaned and deduplicated (:mod:`azllm.sft.clean`), the
held-out (selection) and verdict splits drawn, decontaminated against them and the evaluation texts
(:mod:`azllm.sft.decontaminate`), length-limited; and the table of what each step kept.

Reads ``sft`` (sources, splits, decontamination, lengths), ``data.eval`` and the evaluation tasks' data.

- :func:`sft_data`: the conversations of a run, ``{"train", "held_out", "verdict", "counts", "notes", "key"}``;
- :func:`data_rows`: the data table of notebook 07 from its ``counts``;
- :func:`eval_texts`: the evaluation texts the training conversations are decontaminated against.
"""

from __future__ import annotations

from ..config import Config
from ..sft.data import SftData
from .sources import resolve
from .tasks import decontamination_sets

__all__ = ["sft_data", "data_rows", "eval_texts"]


def eval_texts(cfg: Config) -> tuple[dict[str, list[str]], list[str]]:
    """The evaluation texts decontaminated against, by name (``data.eval``, ``sft.decontaminate_extra`` and the
    local evaluation tasks of ``evaluate.tasks``), and the notes on sources not found."""
    from ..data import DataError, iter_documents

    s = cfg.sft
    names = list(cfg.data.eval) if s.decontaminate_sets is None else list(s.decontaminate_sets)
    unknown = sorted(set(names) - set(cfg.data.eval))
    if unknown:
        raise ValueError(f"sft.decontaminate_sets names {unknown}, not in data.eval ({sorted(cfg.data.eval)})")
    texts, notes = {}, []
    sources = {**{n: cfg.data.eval[n] for n in names}, **s.decontaminate_extra}
    for name, src in sources.items():
        try:
            texts[name] = list(iter_documents(resolve(cfg, src)))
        except DataError as e:
            notes.append(f"{name}: not found, not checked ({e})")
    texts.update(decontamination_sets(cfg))  # every evaluation task named in evaluate.tasks ("task:<name>")
    return texts, notes


def sft_data(cfg: Config, tokenizer) -> SftData:
    """The conversations of a run: ``{"train", "held_out", "counts", "notes", "key"}`` (module docstring).
    ``counts`` holds every step's numbers (:func:`data_rows` makes the table of them)."""
    from ..sft.clean import apply_length_limit, clean_conversations, dedupe_prompts, holdout_split
    from ..sft.data import read_conversations
    from ..sft.decontaminate import decontaminate
    from ..sft.template import conversation_lengths
    from ..utils import json_hash

    s = cfg.sft
    if s.holdout_size > 0 and s.holdout_source not in s.sources:
        raise ValueError(f"sft.holdout_source {s.holdout_source!r} is not in sft.sources ({sorted(s.sources)})")
    for one, other in zip(
        ("eval_sources", "verdict_sources", "verdict_sources"), ("sources", "sources", "eval_sources")
    ):
        if both := sorted(set(getattr(s, one)) & set(getattr(s, other))):
            raise ValueError(f"sft.{one} and sft.{other} both name {both}: a test set is never trained or chosen on")
    if s.holdout_size <= 0 and not s.eval_sources:
        raise ValueError("sft.holdout_size is 0 and sft.eval_sources is empty: nothing to evaluate on")
    per_source, per_test, per_verdict = {}, {}, {}  # each source's counts, by name

    def read(sources: dict, into: dict) -> list[dict]:
        out = []
        for name, src in sources.items():
            got, counts = read_conversations(
                resolve(cfg, src),
                source=name,
                fmt=src.format,
                fields=dict(src.fields),
                placeholders=list(s.placeholders),
                on_bad=s.on_bad_record,
            )
            into[name] = {**counts, "origin": src.origin}
            out += got
        return out

    convs = read(s.sources, per_source)
    tests, _ = clean_conversations(read(s.eval_sources, per_test))
    verdict_tests, _ = clean_conversations(read(s.verdict_sources, per_verdict))
    cleaned, c_counts = clean_conversations(convs)
    deduped, d_counts = dedupe_prompts(cleaned, threshold=s.near_dup_threshold)
    after_dedupe, before_verdict = len(deduped), {"held_out": 0, "examples": {}}
    # a conversation that repeats a verdict prompt is neither chosen on nor trained on
    if verdict_tests and s.decontaminate:
        deduped, before_verdict = decontaminate(deduped, held_out=verdict_tests, eval_texts={}, n=s.decontaminate_ngram)
    # the held-out (selection) split first: with a verdict split added, it stays the one the records made before it
    # held out (and chose on), and the verdict comes from conversations no earlier choice read
    rest, held = holdout_split(deduped, source=s.holdout_source, size=s.holdout_size, seed=s.holdout_seed)
    train, verdict = holdout_split(rest, source=s.holdout_source, size=s.verdict_size, seed=s.holdout_seed)
    drawn, v_drawn = len(held), len(verdict)
    held += tests
    if verdict_tests:  # judged instead of the drawn ones, which stay out of training: the same training data
        verdict = verdict_tests
    notes: list[str] = []
    if s.decontaminate:
        texts, notes = eval_texts(cfg)
        train, x_counts = decontaminate(train, held_out=held + verdict, eval_texts=texts, n=s.decontaminate_ngram)
    else:
        x_counts = {"held_out": 0, "examples": {}}
    if verdict_tests:
        x_counts["verdict_sources"] = before_verdict["held_out"]

    def limit(split: list[dict]) -> tuple[list[dict], dict]:
        lengths = conversation_lengths(tokenizer, split)
        return apply_length_limit(split, lengths, max_length=s.max_length, policy=s.length_policy)

    (train, l_counts), (held, lh_counts), (verdict, lv_counts) = limit(train), limit(held), limit(verdict)
    for name in per_source:
        per_source[name]["train"] = sum(c["source"] == name for c in train)
        per_source[name]["held_out"] = sum(c["source"] == name for c in held)
    counts = {
        "sources": per_source,
        "read": sum(v["read"] for v in per_source.values()),
        "bad": {k: v for src in per_source.values() for k, v in src["bad"].items()},
        "placeholder_inputs": sum(v["placeholder_inputs"] for v in per_source.values()),
        **c_counts,
        "after_clean": len(cleaned),
        "duplicates": d_counts,
        "after_dedupe": after_dedupe,
        "held_out_drawn": drawn,
        "eval_sources": len(tests),
        "held_out": len(held),
        "held_out_origin": s.sources[s.holdout_source].origin if s.holdout_size > 0 else "none",
        "eval_source_counts": per_test,
        "decontaminated": x_counts,
        "length": l_counts,
        "length_held_out": lh_counts,
        "train": len(train),
    }
    if v_drawn or verdict_tests:  # only with a verdict split: the records made before it keep their counts
        counts.update(verdict_drawn=v_drawn, verdict=len(verdict), length_verdict=lv_counts)
    if verdict_tests:
        counts.update(verdict_sources=len(verdict_tests), verdict_source_counts=per_verdict)
    keyed = {"train": [c["messages"] for c in train], "held": [c["messages"] for c in held]}
    if verdict:  # without a verdict split, the key of the records made before it
        keyed["verdict"] = [c["messages"] for c in verdict]
    key = json_hash(keyed, n=12)
    return {"train": train, "held_out": held, "verdict": verdict, "counts": counts, "notes": notes, "key": key}


def data_rows(counts: dict) -> list[dict]:
    """The data table: what each step kept, and why the others went."""
    d = counts
    x = {k: v for k, v in d["decontaminated"].items() if k != "examples"}
    rows = [
        {
            "step": "read",
            "conversations": d["read"],
            "note": ", ".join(f"{n}: {v['read']} ({v['origin']})" for n, v in d["sources"].items()),
        },
        {
            "step": "cleaned",
            "conversations": d["after_clean"],
            "note": f"{sum(d['bad'].values())} bad records dropped {d['bad'] or ''}; {d['dropped_empty']} left "
            f"empty; {d['empty_turns']} empty turns removed; {d['placeholder_inputs']} placeholder inputs "
            "treated as empty",
        },
        {
            "step": "deduplicated",
            "conversations": d["after_dedupe"],
            "note": f"{d['duplicates']['exact']} exact, {d['duplicates']['near']} near-duplicate prompts",
        },
        {
            "step": "held out",
            "conversations": d["held_out_drawn"],
            "note": f"fixed split of {d['held_out_origin']} text"
            + (f", + {d['eval_sources']} of sft.eval_sources (never trained on)" if d.get("eval_sources") else "")
            + f"; {d['held_out']} within max_length"
            + ("; the selection split: held-out loss and every choice" if "verdict" in d else ""),
        },
        *(
            [
                {
                    "step": "verdict",
                    "conversations": d["verdict_drawn"],
                    "note": f"fixed split of {d['held_out_origin']} text, drawn after the held-out one"
                    + (
                        f", not trained on; every judgement reads the {d['verdict_sources']} of sft.verdict_sources "
                        "instead, no choice does"
                        if d.get("verdict_sources")
                        else ": every judgement reads it, no choice does"
                    )
                    + f"; {d['verdict']} within max_length",
                }
            ]
            if "verdict" in d
            else []
        ),
        {
            "step": "decontaminated",
            "conversations": d["after_dedupe"] - d["held_out_drawn"] - d.get("verdict_drawn", 0) - sum(x.values()),
            "note": ", ".join(f"{k}: {v}" for k, v in x.items()) + " dropped",
        },
        {
            "step": "length limit",
            "conversations": d["train"],
            "note": f"{d['length']['too_long']} over max_length: {d['length']['dropped_long']} dropped, "
            f"{d['length']['truncated']} truncated (held out: {d['length_held_out']['too_long']} over)",
        },
        {"step": "train", "conversations": d["train"], "note": ""},
    ]
    return rows
