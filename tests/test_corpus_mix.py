"""The mix of the corpus stage (azllm.corpus.mix): rates, copies, sentence near-duplicates, caps in input order."""

import json

import pytest
from corpus_helpers import AMENDMENTS, KILL_SCRIPT, PROSE, TURKISH, _clean, _write, cleaned, flores  # noqa: F401

from azllm.corpus import rates
from azllm.corpus.mix import (
    FilterTooSmallError,
    SeenShingles,
    copies,
    drop_seen_sentences,
    expected_3grams,
    write_mix,
)
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
    seen = SeenShingles(expected=10_000)
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
        sentence_filter=None,
        seed=0,
    )
    lines = [json.loads(x)["text"] for x in (tmp_path / "mix.jsonl").read_text().splitlines()]
    assert lines == [r["text"] for r in recs[:3]]  # the first bytes of legal, in order
    zero = dict.fromkeys(("sentences", "dropped_sentences", "dropped_sentence_bytes"), 0)
    assert counts == {
        "legal": {
            "docs": 3,
            "bytes": sum(len(t.encode()) for t in lines),
            **zero,
            "subsampled_docs": 0,
            "capped_docs": 3,
            "capped_bytes": sum(len(r["text"].encode()) for r in recs[3:6]),
        },
        "poetry": {"docs": 0, "bytes": 0, **zero, "subsampled_docs": 3, "capped_docs": 0, "capped_bytes": 0},
    }


def _distinct_docs(n_bytes: int, seed: int = 0) -> list[dict]:
    """Documents of distinct sentences (3-24 words drawn from 60,000 made-up words): nothing in them repeats."""
    import random

    rng = random.Random(seed)
    letters = "abcçdeəfgğhxıijkqlmnoöprsştuüvyz"
    vocab = list({"".join(rng.choices(letters, k=rng.randint(2, 11))) for _ in range(60_000)})
    docs, size = [], 0
    while size < n_bytes:
        sents = [
            " ".join(rng.choices(vocab, k=rng.randint(3, 24))).capitalize() + "." for _ in range(rng.randint(1, 30))
        ]
        text = " ".join(sents)
        docs.append({"id": f"gen/{len(docs)}", "text": text, "metadata": {"source": "gen"}})
        size += len(text.encode())
    return docs


def test_a_filter_sized_from_the_bytes_keeps_distinct_sentences_and_records_its_rate(tmp_path):
    """2 MB of distinct sentences through a filter sized by expected_3grams at the default rates: at least 99.9%
    of the sentences stay, the counts add up, and the filter's measured rate is within its bound."""
    docs = _distinct_docs(2_000_000)
    n_bytes = sum(len(d["text"].encode()) for d in docs)
    seen = SeenShingles(expected_3grams(n_bytes))
    counts = write_mix(
        iter(docs), tmp_path / "mix.jsonl", source_rates={"gen": 1.0}, caps={}, sentence_filter=seen, seed=0
    )
    c = counts["gen"]
    assert c["sentences"] == sum(d["text"].count(".") for d in docs)
    assert c["dropped_sentences"] / c["sentences"] < 0.001, c
    assert c["docs"] == len(docs)
    st = seen.stats()
    assert st["added_3grams"] <= st["expected_3grams"] and st["false_positive"] < st["design_false_positive"]


def test_the_measured_false_positive_rate_is_what_the_filter_gives():
    """After ``expected`` keys the share of never-added keys that look seen is the filter's own estimate (about its
    design rate, 0.01), within four binomial standard errors."""
    seen = SeenShingles(expected=20_000)
    seen.add_and_share([f"key {i}" for i in range(20_000)])
    p, fresh = seen.false_positive_rate, 20_000
    assert 0.005 < p < 0.015
    measured = seen.share_seen([f"new {i}" for i in range(fresh)])
    assert abs(measured - p) < 4 * (p * (1 - p) / fresh) ** 0.5, (measured, p)


def test_a_filter_too_small_for_its_input_stops_instead_of_dropping_text(tmp_path):
    """A filter sized for 1,000 3-grams that gets 2 MB of distinct text stops with a clear error, and no mix file is
    left behind (before, a fixed filter silently dropped more and more new sentences as it filled)."""
    seen = SeenShingles(expected=1000)
    with pytest.raises(FilterTooSmallError, match=r"sized for 1,000 word 3-grams.*expected_per_byte"):
        write_mix(
            iter(_distinct_docs(2_000_000)),
            tmp_path / "mix.jsonl",
            source_rates={"gen": 1.0},
            caps={},
            sentence_filter=seen,
            seed=0,
        )
    assert list(tmp_path.iterdir()) == []


def test_the_batched_filter_is_exactly_the_one_key_at_a_time_loop():
    """``add_and_share_groups`` (numpy, one call per document) against ``add_and_share`` (one key at a time) on
    text with repeats inside a sentence, across sentences and across documents, on a filter small enough that
    different keys share bits: the same shares, set bits, count and bit array."""
    import random

    from azllm.corpus.mix import sentence_3grams, split_sentences

    rng = random.Random(3)
    words = " ".join([*PROSE, *AMENDMENTS]).split()
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 120))) for _ in range(300)]
    docs += [docs[5], docs[7] + " " + docs[7], ""]
    batched, looped = SeenShingles(expected=3000), SeenShingles(expected=3000)
    for doc in docs:
        groups = [sentence_3grams(s) for s in split_sentences(doc)]
        assert batched.add_and_share_groups(groups) == [looped.add_and_share(g) for g in groups]
    assert (batched.set_bits, batched.added) == (looped.set_bits, looped.added)
    assert batched.array.tobytes() == looped.array.tobytes()
    assert 0.05 < batched.false_positive_rate < 0.9  # crowded: bit collisions between keys did happen
    assert batched.positions(["a b c"]).tolist()[0] == batched._positions("a b c")
