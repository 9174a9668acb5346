"""Instruction records as conversations: the three formats from jsonl, parquet and a dataset folder read through the
hub path, renamed fields, placeholder inputs, and the bad records that stop with an error naming them (or are
dropped and counted)."""

import json

import pytest

from azllm.data import resolve_source
from azllm.sft.data import (
    SftDataError,
    check_conversation,
    detect_format,
    is_placeholder,
    read_conversations,
    to_conversation,
)
from conftest import FIXTURES

SFT = FIXTURES / "data" / "az" / "sft"


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def _read(path, **kw):
    return read_conversations(resolve_source({"path": str(path)}, None), source="s", **kw)


def test_the_fixture_files_read_as_conversations():
    native, c1 = _read(SFT / "native_train.jsonl")
    alpaca, c2 = _read(SFT / "alpaca_az_mt.jsonl", placeholders=["Yox"])
    assert c1 == {"read": 30, "placeholder_inputs": 0, "bad": {}} and len(native) == 30
    assert native[0]["id"] == "s:nat_001" and [m["role"] for m in native[0]["messages"]] == ["user", "assistant"]
    yox = sum('"input": "Yox"' in line for line in (SFT / "alpaca_az_mt.jsonl").read_text().splitlines())
    assert c2["placeholder_inputs"] == yox > 0
    assert not any(m["content"].endswith("\n\nYox") for c in alpaca for m in c["messages"])
    real = next(c for c in alpaca if "\n\n" in c["messages"][0]["content"])  # an input that is not a placeholder
    assert real["placeholder_input"] is False


def test_formats_are_detected_and_converted(tmp_path):
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}]
    cases = {
        "messages": {"messages": msgs},
        "prompt_completion": {"prompt": "U", "completion": "A", "system": "S"},
        "instruction": {"instruction": "U", "input": "", "output": "A", "system": "S"},
    }
    for fmt, rec in cases.items():
        assert detect_format(rec) == fmt
        assert to_conversation(rec, where="x")["messages"] == msgs
    conv = to_conversation(
        {"prompt": [{"role": "user", "content": "U"}], "completion": [{"role": "assistant", "content": "A"}]}, where="x"
    )
    assert conv["messages"] == msgs[1:]
    conv = to_conversation({"instruction": "Tərcümə et", "input": "Salam", "response": "Hello"}, where="x")
    assert conv["messages"][0]["content"] == "Tərcümə et\n\nSalam"


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_renamed_fields_in_jsonl_and_parquet(tmp_path, suffix):
    recs = [{"question": f"Sual {i}", "answer": f"Cavab {i}", "qid": i} for i in range(3)]
    path = tmp_path / f"d.{suffix}"
    if suffix == "jsonl":
        _jsonl(path, recs)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(recs), path)
    convs, counts = _read(path, fields={"instruction": "question", "output": "answer", "id": "qid"})
    assert counts["read"] == 3 and convs[2]["id"] == "s:2"
    assert convs[1]["messages"] == [{"role": "user", "content": "Sual 1"}, {"role": "assistant", "content": "Cavab 1"}]


def test_a_local_dataset_folder_goes_through_the_hub_path(tmp_path):
    """A local folder given as ``hub`` is read by the same ``datasets.load_dataset`` call as a hub id."""
    folder = tmp_path / "my-chat-set"
    folder.mkdir()
    _jsonl(
        folder / "train.jsonl",
        [{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}] * 2,
    )
    r = resolve_source({"path": None, "hub": str(folder), "split": "train"}, None)
    convs, counts = read_conversations(r, source="hub")
    assert r.kind == "hub" and counts["read"] == 2 and convs[0]["where"].endswith("[train]#0")


def test_an_unreachable_hub_dataset_says_what_to_do(monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    r = resolve_source({"hub": "nobody-here/no-such-chat-set"}, None)
    with pytest.raises(SftDataError, match=r"nobody-here/no-such-chat-set.*could not be opened.*local jsonl/parquet"):
        read_conversations(r, source="x")


BAD = {
    "unknown role": (
        {"messages": [{"role": "human", "content": "a"}, {"role": "assistant", "content": "b"}]},
        r"b\.jsonl:2: unknown role 'human' \(turn 0; roles: system, user, assistant\)",
    ),
    "no assistant turn": ({"messages": [{"role": "user", "content": "a"}]}, r"b\.jsonl:2: no assistant turn"),
    "ends on a user turn": (
        {
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
                {"role": "user", "content": "c"},
            ]
        },
        r"b\.jsonl:2: ends on a user turn",
    ),
    "turn without content": (
        {"messages": [{"role": "user", "text": "a"}]},
        r"b\.jsonl:2: turn 0 of field 'messages' needs 'role' and 'content' \(found: "
        r"\['role', 'text'\]\)",
    ),
}


@pytest.mark.parametrize("what", BAD)
def test_bad_records_stop_with_the_record_named_or_are_dropped_and_counted(tmp_path, what):
    good = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}
    rec, msg = BAD[what]
    path = _jsonl(tmp_path / "b.jsonl", [good, rec, good])
    with pytest.raises(SftDataError, match=msg):
        _read(path)
    if what != "turn without content":
        convs, counts = _read(path, on_bad="drop")
        assert len(convs) == 2 and sum(counts["bad"].values()) == 1 and what.split()[0] in next(iter(counts["bad"]))


def test_a_field_name_not_in_the_data_lists_the_fields_found(tmp_path):
    path = _jsonl(tmp_path / "q.jsonl", [{"question": "a", "answer": "b"}])
    with pytest.raises(
        SftDataError,
        match=r"q\.jsonl:1: record fields \['answer', 'question'\] match no "
        r"instruction format.*`fields` map",
    ):
        _read(path)
    with pytest.raises(
        SftDataError,
        match=r"q\.jsonl:1: no field 'prompt_text' \(fields found: \['answer', "
        r"'question'\]\)",
    ):
        _read(path, fmt="prompt_completion", fields={"prompt": "prompt_text", "completion": "answer"})
    with pytest.raises(SftDataError, match=r"unknown canonical field name\(s\) \['question'\]"):
        _read(path, fields={"question": "q"})


def test_placeholders_and_structure_checks():
    assert is_placeholder("Yox.", ["Yox"]) and is_placeholder("", []) and not is_placeholder("Yoxlayın", ["Yox"])
    assert check_conversation(
        [{"role": "user", "content": "a"}, {"role": "system", "content": "s"}, {"role": "assistant", "content": "b"}]
    ).startswith("a system turn that is not")
    assert check_conversation([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]) is None
