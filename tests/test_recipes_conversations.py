"""The SFT stage's conversations (azllm.recipes.conversations) on the fixture instruction data: the data table
counts every step, the verdict split is drawn after the held-out one and only judgements read it, and the user's own
test sets (``sft.eval_sources``, ``sft.verdict_sources``) are scored and never trained on."""

import json
from pathlib import Path

import pytest
from sft_helpers import params, tiny_base  # noqa: F401  (fixture)

from azllm.recipes import conversations, sft
from conftest import FIXTURES


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def test_the_data_table_counts_every_step(tiny_base, tmp_path):
    cfg = params(tiny_base, tmp_path)
    tok, template = sft.sft_tokenizer(cfg, str(tiny_base))
    d = conversations.sft_data(cfg, tok)
    c = d["counts"]
    assert c["read"] == 70 and c["sources"]["native"]["origin"] == "native" and c["held_out_drawn"] == 5
    assert (
        c["placeholder_inputs"]
        == sum(
            '"input": "Yox"' in line for line in (FIXTURES / "data/az/sft/alpaca_az_mt.jsonl").read_text().splitlines()
        )
        > 0
    )
    assert c["held_out"] == len(d["held_out"]) == 5 - c["length_held_out"]["dropped_long"]
    assert all(x["source"] == "native" for x in d["held_out"]) and {"flores", "xwmt", "tumlu"} <= set(
        c["decontaminated"]
    )
    rows = {r["step"]: r["conversations"] for r in conversations.data_rows(c)}
    assert rows["read"] >= rows["cleaned"] >= rows["deduplicated"] and rows["train"] == len(d["train"])
    assert (
        rows["deduplicated"]
        - rows["held out"]
        - sum(v for k, v in c["decontaminated"].items() if k != "examples")
        - c["length"]["dropped_long"]
        == rows["train"]
    )
    assert c["length"]["too_long"] > 0  # max_length 256 with a 512-piece tokenizer: some conversations are longer
    assert not {x["id"] for x in d["train"]} & {x["id"] for x in d["held_out"]}
    assert d["key"] == conversations.sft_data(cfg, tok)["key"]  # the same data, the same key


def test_a_verdict_split_is_drawn_after_the_held_out_one_and_only_judgements_read_it(tiny_base, tmp_path):
    """``sft.verdict_size``: the first conversations of the keyed hash are the held-out (selection) split, the same
    as without a verdict split (what earlier choices read), the next the verdict split; none of them is trained on,
    training text is decontaminated against both, every
    judgement reads the verdict (judge.judged), and without it the split and the key are those of before."""
    from azllm.recipes import judge

    tok, _ = sft.sft_tokenizer(params(tiny_base, tmp_path), str(tiny_base))
    before = conversations.sft_data(params(tiny_base, tmp_path), tok)
    d = conversations.sft_data(params(tiny_base, tmp_path, verdict_size=4), tok)
    c = d["counts"]
    assert "verdict" not in before["counts"] and before["verdict"] == [] and judge.judged(before) == before["held_out"]
    assert c["verdict_drawn"] == 4 and c["verdict"] == len(d["verdict"]) == 4 - c["length_verdict"]["dropped_long"]
    ids = [{x["id"] for x in d[k]} for k in ("train", "held_out", "verdict")]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert all(x["source"] == "native" for x in d["verdict"]) and judge.judged(d) == d["verdict"]
    assert ids[1] == {x["id"] for x in before["held_out"]}  # the same hash: the held-out split is drawn first
    assert not ids[2] & ids[1]  # the verdict: conversations that no choice made on the held-out split read
    assert (
        d["key"] != before["key"] and before["key"] == conversations.sft_data(params(tiny_base, tmp_path), tok)["key"]
    )
    rows = {r["step"]: r["conversations"] for r in conversations.data_rows(c)}
    assert rows["verdict"] == 4 and rows["held out"] == 5
    assert (
        rows["deduplicated"]
        - rows["held out"]
        - rows["verdict"]
        - sum(v for k, v in c["decontaminated"].items() if k != "examples")
        - c["length"]["dropped_long"]
        == rows["train"]
    )


def _test_and_train(tmp_path: Path, prompts: list[str], name: str) -> dict:
    """Write ``name`` (one answer per prompt) and train.jsonl (20 sums and the first test conversation); return
    train.jsonl as the ``mine`` source."""
    test = [{"instruction": p, "output": f"Cavab {i}."} for i, p in enumerate(prompts)]
    _jsonl(tmp_path / name, test)
    sums = ({"instruction": f"{i} üstəgəl {i} neçədir?", "output": f"{2 * i}."} for i in range(20))
    _jsonl(tmp_path / "train.jsonl", [*sums, test[0]])
    return {"mine": {"path": str(tmp_path / "train.jsonl"), "origin": "native"}}


def test_a_separate_test_file_is_scored_and_never_trained_on(tiny_base, tmp_path):
    """``sft.eval_sources``: every conversation of the user's own test set is held out, with ``holdout_size`` 0
    (drawing the whole source was refused: "leaves no training conversation"), and a training conversation that
    repeats a test prompt is decontaminated away."""
    prompts = [
        "Xəzər dənizi haqqında bir cümlə yaz.",
        "Ən uzun çay hansıdır?",
        "Şahmatda atın gedişini izah et.",
        "Novruz bayramı nə vaxt qeyd olunur?",
        "Fotosintez nədir?",
        "Bir şeir adı de.",
    ]
    srcs = _test_and_train(tmp_path, prompts, "test.jsonl")
    with pytest.raises(Exception, match="leaves no training conversation"):  # the old way: hold out a whole source
        cfg = params(
            tiny_base,
            tmp_path / "art",
            holdout_source="t",
            holdout_size=6,
            sources={**srcs, "t": {"path": str(tmp_path / "test.jsonl")}},
        )
        conversations.sft_data(cfg, sft.sft_tokenizer(cfg, str(tiny_base))[0])
    cfg = params(
        tiny_base,
        tmp_path / "art",
        holdout_size=0,
        holdout_source="mine",
        sources=srcs,
        eval_sources={"test": {"path": str(tmp_path / "test.jsonl"), "origin": "native"}},
    )
    d = conversations.sft_data(cfg, sft.sft_tokenizer(cfg, str(tiny_base))[0])
    assert len(d["held_out"]) == 6 and {c["source"] for c in d["held_out"]} == {"test"}
    assert len(d["train"]) == 20 and d["counts"]["decontaminated"]["held_out"] == 1
    assert d["counts"]["eval_sources"] == 6 and d["counts"]["read"] == 21
    assert "6 of sft.eval_sources" in next(
        r["note"] for r in conversations.data_rows(d["counts"]) if r["step"] == "held out"
    )
    with pytest.raises(ValueError, match="never trained or chosen on"):
        bad = params(tiny_base, tmp_path / "art", holdout_source="mine", sources=srcs, eval_sources=srcs)
        conversations.sft_data(bad, sft.sft_tokenizer(bad, str(tiny_base))[0])


def test_your_own_verdict_set_is_judged_never_trained_on_and_never_chosen_on(tiny_base, tmp_path):
    """``sft.verdict_sources`` (native answers kept apart: a study's verdict on data this repository lacks,
    docs/evaluation.md): judged instead of the drawn verdict conversations, which stay out of training; not in the
    selection split; and a training conversation that repeats one of its prompts is dropped before the draws."""
    from azllm.recipes import judge

    asked = ["Fotosintez nədir və bitkilər onu gün ərzində necə edir?", "Azərbaycan şairlərinin ən məşhur şeirini de."]
    srcs = _test_and_train(tmp_path, asked, "verdict.jsonl")
    mine = {"test": {"path": str(tmp_path / "verdict.jsonl"), "origin": "native"}}
    tok, _ = sft.sft_tokenizer(params(tiny_base, tmp_path / "art", sources=srcs, holdout_source="mine"), str(tiny_base))
    for size in (0, 3):
        cfg = params(tiny_base, tmp_path / "art", sources=srcs, holdout_source="mine", holdout_size=4,
                     verdict_size=size, verdict_sources=mine)  # fmt: skip
        d = conversations.sft_data(cfg, tok)
        assert [c["source"] for c in d["verdict"]] == ["test", "test"]  # judged instead of the drawn ones
        assert judge.judged(d) == d["verdict"] and {c["source"] for c in d["held_out"]} == {"mine"}
        assert d["counts"]["decontaminated"]["verdict_sources"] == 1 and len(d["train"]) == 20 - 4 - size
        rows = {r["step"]: r for r in conversations.data_rows(d["counts"])}
        assert (
            rows["verdict"]["conversations"] == size and "reads the 2 of sft.verdict_sources" in rows["verdict"]["note"]
        )
        assert rows["decontaminated"]["conversations"] == rows["train"]["conversations"] == len(d["train"])
    for other in ({"sources": {**srcs, **mine}}, {"sources": srcs, "eval_sources": mine}):
        bad = params(tiny_base, tmp_path / "art", holdout_source="mine", verdict_sources=mine, **other)
        with pytest.raises(ValueError, match="both name"):
            conversations.sft_data(bad, tok)
