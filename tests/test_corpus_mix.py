"""The mix of the corpus stage (azllm.corpus.mix): rates, copies, sentence near-duplicates, caps in input order."""

import json

import pytest
from corpus_helpers import AMENDMENTS, KILL_SCRIPT, PROSE, TURKISH, _clean, _write, cleaned, flores  # noqa: F401

from azllm.corpus import rates
from azllm.corpus.mix import SeenShingles, copies, drop_seen_sentences, write_mix
from azllm.data import DataError


def test_mix_rates_and_copies_are_deterministic():
    r = rates({"legal": 12_000_000, "wiki": 2_000_000}, temperature=0.0)
    assert r == {"legal": pytest.approx(7 / 12), "wiki": pytest.approx(3.5)}
    assert rates({"legal": 100, "wiki": 100}, weights={"legal": 0.0})["legal"] == 0.0
    with pytest.raises(DataError, match=r"unknown source\(s\) \['news'\]"):
        rates({"legal": 100}, weights={"news": 1.0})
    picks = [copies(f"legal/{i}", 0.5, seed=1) for i in range(2000)]
    assert picks == [copies(f"legal/{i}", 0.5, seed=1) for i in range(2000)]
    assert 900 < sum(picks) < 1100


def test_sentence_near_duplicates_inside_a_source_are_dropped():
    seen = SeenShingles(bits=1 << 20)
    first = AMENDMENTS[0] + " Bu maddə 2018-ci ildən qüvvədədir."
    assert drop_seen_sentences(first, seen, "legal") == first
    # the same note with other numbers, and one new sentence: only the new sentence stays
    again = AMENDMENTS[1] + " Məcəllənin yeni redaksiyası dərc olunub."
    assert drop_seen_sentences(again, seen, "legal") == "Məcəllənin yeni redaksiyası dərc olunub."
    assert drop_seen_sentences(again, seen, "news") == again  # another source has its own history


def test_write_mix_caps_in_input_order_and_drops_weight_zero(tmp_path):
    recs = [
        {
            "id": f"s/0/{i}",
            "text": f"Sənəd nömrə {i} haqqında {w} məlumat verilir.",
            "metadata": {"source": src, "order": [0, 0, i]},
        }
        for i, (src, w) in enumerate([("legal", "hüquqi")] * 6 + [("poetry", "şeir")] * 3)
    ]
    counts = write_mix(
        iter(recs),
        tmp_path / "mix.jsonl",
        source_rates={"legal": 1.0, "poetry": 0.0},
        caps={"legal": sum(len(r["text"].encode()) for r in recs[:3]) + 10},
        sentence_dedup=False,
        seed=0,
    )
    lines = [json.loads(x)["text"] for x in (tmp_path / "mix.jsonl").read_text().splitlines()]
    assert lines == [r["text"] for r in recs[:3]]  # the first bytes of legal, in order
    assert counts == {
        "legal": {"docs": 3, "bytes": sum(len(t.encode()) for t in lines)},
        "poetry": {"docs": 0, "bytes": 0},
    }
