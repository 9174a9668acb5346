"""Preference data (azllm.prefer.data): TRL's formats read and checked with clear errors, on-policy pairs whose
rejected answers are the model's own, native over machine-translated pairs, decontamination and source shares."""

import json

import pytest
from prefer_helpers import model_and_tokenizer
from sft_helpers import conversations, tiny_base  # noqa: F401  (fixtures)

from azllm.prefer.data import (
    PreferenceDataError,
    build_pairs,
    check_lengths,
    decontaminate_pairs,
    native_over_mt,
    read_pairs,
    source_shares,
    to_pair,
)


def _write(path, records):
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n", encoding="utf-8")
    return path


def test_every_trl_format_becomes_the_conversational_form(tmp_path):
    std = {"prompt": "Bakı haradadır?", "chosen": "Xəzərin sahilində.", "rejected": "Bilmirəm."}
    conv = {
        "prompt": [{"role": "user", "content": "Salam?"}],
        "chosen": [{"role": "assistant", "content": "Salam!"}],
        "rejected": [{"role": "assistant", "content": "Sağ ol."}],
    }
    kto = {"prompt": "Salam?", "completion": "Salam!", "label": True}
    pairs = read_pairs(_write(tmp_path / "mine.jsonl", [std, conv, kto]))
    assert [p["source"] for p in pairs] == ["mine"] * 3
    assert pairs[0]["prompt"] == [{"role": "user", "content": "Bakı haradadır?"}]
    assert pairs[1]["rejected"] == conv["rejected"] and pairs[2]["label"] is True


@pytest.mark.parametrize(
    "record, message",
    [
        ({"prompt": "a", "chosen": "b"}, r"no \['rejected'\]"),
        ({"prompt": "a", "chosen": "  ", "rejected": "c"}, "empty assistant turn"),
        ({"prompt": [], "chosen": "b", "rejected": "c"}, "no turn"),
        ({"prompt": "a", "chosen": "Eyni cavab.", "rejected": " Eyni  cavab. "}, "the same text"),
        ({"prompt": "a", "completion": "b", "label": "yes"}, "true or false"),
        ({"prompt": "a", "completion": "b"}, r"no \['label'\]"),
        ({"prompt": "a", "chosen": [{"content": "b"}], "rejected": "c"}, "lacks 'role'"),
    ],
)
def test_bad_records_stop_with_the_line_and_what_to_fix(record, message, tmp_path):
    path = _write(tmp_path / "bad.jsonl", [{"prompt": "x", "chosen": "y", "rejected": "z"}, record])
    with pytest.raises(PreferenceDataError, match=message) as e:
        read_pairs(path)
    assert "bad.jsonl:2" in str(e.value)
    (tmp_path / "broken.jsonl").write_text('{"prompt": \n')
    with pytest.raises(PreferenceDataError, match="not JSON"):
        read_pairs(tmp_path / "broken.jsonl")


def test_a_prompt_that_fills_max_length_is_refused(tiny_base):
    _, tok, _ = model_and_tokenizer(tiny_base, method="full")
    long = to_pair({"prompt": "söz " * 400, "chosen": "a", "rejected": "b"}, "long")
    short = to_pair({"prompt": "Salam?", "chosen": "a", "rejected": "b"}, "short")
    check_lengths([short], tok, 128)
    with pytest.raises(PreferenceDataError, match="long: the prompt is .* max_length 128"):
        check_lengths([short, long], tok, 128)


def test_rejected_answers_are_the_models_own(tiny_base, conversations):
    from azllm.engine import Decoding, torch_engine
    from azllm.sft.generate import generate_answers

    model, tok, _ = model_and_tokenizer(tiny_base, method="full")
    convs = conversations[:6]
    answers = generate_answers(torch_engine(model, tok, batch_size=3), convs, Decoding(max_new_tokens=12))
    refs = [c["messages"][-1]["content"] for c in convs]
    pairs, counts = build_pairs(
        [c["messages"][:-1] for c in convs], refs, [a["answer"] for a in answers], [c["id"] for c in convs], "native"
    )
    assert counts["built"] == len(pairs) > 0 and counts["built"] + counts["same"] == len(convs)
    for p, a, c in zip(pairs, answers, convs):
        assert p["rejected"][0]["content"] == a["answer"] != p["chosen"][0]["content"] == c["messages"][-1]["content"]
        assert p["chosen"][0]["content"] != p["rejected"][0]["content"]
    pairs, counts = build_pairs([convs[0]["messages"][:-1]] * 2, [refs[0]] * 2, [refs[0] + " ", ""], ["x", "y"], "s")
    assert counts == {"built": 1, "same": 1, "empty": 1}
    assert pairs[0]["rejected"] == [{"role": "assistant", "content": ""}] and pairs[0]["id"] == "s/y"


def test_native_answers_are_chosen_over_translated_ones_for_the_same_prompt():
    def conv(i, q, a):
        return {"id": i, "messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}

    native = [conv("n1", "Bakı haradadır?", "Xəzərin sahilində."), conv("n2", "Tək sual?", "Cavab.")]
    mt = [conv("m1", "bakı  haradadır?", "Bakı Xəzər dənizinin qərb sahilində yerləşir."), conv("m2", "Başqa?", "X")]
    pairs = native_over_mt(native, mt)
    assert len(pairs) == 1 and pairs[0]["chosen"][0]["content"] == "Xəzərin sahilində."
    assert pairs[0]["rejected"][0]["content"].startswith("Bakı Xəzər") and pairs[0]["source"] == "native_over_mt"


def test_pairs_that_overlap_an_eval_set_are_dropped_and_shares_counted():
    flores = "Bu gün səhər saatlarında Bakının mərkəzində böyük bir konsert keçirildi və minlərlə insan gəldi."
    clean = to_pair(
        {"prompt": "Salam, necəsən?", "chosen": "Yaxşıyam, sağ ol.", "rejected": "Bilmirəm."}, "a", "native"
    )
    dirty = to_pair({"prompt": "Tərcümə et.", "chosen": flores, "rejected": "Yox."}, "b", "built")
    kept, counts = decontaminate_pairs([clean, dirty], held_out=[], eval_texts={"flores": [flores]})
    assert [p["id"] for p in kept] == ["a"] and counts["flores"] == 1
    assert source_shares([clean, dirty, clean]) == {"built": 1 / 3, "native": 2 / 3}
