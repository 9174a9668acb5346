"""The corpus stage's datatrove steps and readers (azllm.corpus.pipeline): source names, the exact-dedup key,
jsonl reading, input order, what identifies the inputs."""

import json

import pytest
from datatrove.data import Document

from azllm.corpus.pipeline import exact_key, in_input_order, input_ids, read_jsonl, source_name
from azllm.data import DataError, resolve_source


def test_exact_key_is_azerbaijani_lowercase_with_collapsed_whitespace():
    assert exact_key(Document(text="İSTANBUL   və  BAKI", id="1")) == "istanbul və bakı"


def test_source_names():
    assert source_name("/x/legal_codes.txt") == "legal_codes" and source_name("a/b") == "a/b"


def test_jsonl_shards_merge_back_into_input_order(tmp_path):
    for shard, orders in (("00000.jsonl", [0, 3, 4]), ("00001.jsonl", [1, 2])):
        (tmp_path / shard).write_text(
            "".join(json.dumps({"text": f"d{o}", "metadata": {"order": o}}) + "\n" for o in orders)
        )
    assert [r["text"] for r in in_input_order(tmp_path)] == ["d0", "d1", "d2", "d3", "d4"]
    assert len(list(read_jsonl(tmp_path))) == 5 and len(list(read_jsonl(tmp_path / "00001.jsonl"))) == 2


def test_input_ids_hash_each_file(tmp_path):
    (tmp_path / "a.txt").write_text("bir\n")
    (ids,) = input_ids([resolve_source({"path": str(tmp_path / "*.txt")}, None)])
    assert ids["file"].endswith("a.txt") and len(ids["sha256"]) == 64
    with pytest.raises(DataError, match="no input source"):
        input_ids([])
