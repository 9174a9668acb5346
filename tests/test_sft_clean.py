"""Cleaning conversations: normalization that keeps line breaks, empty turns, exact and near-duplicate prompts, the
fixed held-out split, the token-length policy."""

import pytest

from azllm.sft.clean import apply_length_limit, clean_conversations, dedupe_prompts, holdout_split, prompt_text
from azllm.sft.data import SftDataError
from azllm.text import az_upper


def conv(user, answer="Cavab.", source="s", i=0, system=None):
    msgs = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": user},
        {"role": "assistant", "content": answer},
    ]
    return {"id": f"{source}:{i}", "where": f"f:{i}", "source": source, "messages": msgs, "placeholder_input": False}


def test_normalized_with_line_breaks_kept_and_empty_turns_dropped():
    c = conv("Azәrbaycan  paytaxtı\u00a0?\n\n- Bakı", answer="  Bakı’dır. ", system="   ")
    c2 = conv("Sual", answer=" \t ")
    kept, counts = clean_conversations([c, c2])
    assert counts == {"empty_turns": 2, "dropped_empty": 1} and len(kept) == 1
    assert kept[0]["messages"] == [
        {"role": "user", "content": "Azərbaycan paytaxtı ?\n\n- Bakı"},
        {"role": "assistant", "content": "Bakı'dır."},
    ]


def test_exact_and_near_duplicate_prompts():
    base = "Azərbaycanın ən uzun çayı hansıdır və uzunluğu nə qədərdir?"
    convs = [
        conv(base, i=0),
        conv(az_upper(base), i=1),
        conv(base.replace("?", " ?!"), i=2),
        conv("Nizami Gəncəvi haqqında qısa məlumat verin.", i=3),
        conv(base[:-1] + " görəsən?", i=4),
    ]
    kept, counts = dedupe_prompts(convs, threshold=0.8)
    assert [c["id"] for c in kept] == ["s:0", "s:3"] and counts == {"exact": 1, "near": 2}
    kept, counts = dedupe_prompts(convs, threshold=1.0)
    assert len(kept) == 4 and counts == {"exact": 1, "near": 0}
    assert prompt_text(conv("A", system="S")) == "s\na"


def test_holdout_is_fixed_by_its_key_and_draws_only_from_its_source():
    convs = [conv(f"Sual {i}", source="native" if i % 2 else "mt", i=i) for i in range(40)]
    train, held = holdout_split(convs, source="native", size=5, seed=0)
    train2, held2 = holdout_split(
        list(reversed(convs)) + [conv("Yeni", source="mt", i=99)], source="native", size=5, seed=0
    )
    assert {c["id"] for c in held} == {c["id"] for c in held2} and all(c["source"] == "native" for c in held)
    assert len(train) == 35 and {c["id"] for c in holdout_split(convs, source="native", size=5, seed=1)[1]} != {
        c["id"] for c in held
    }
    with pytest.raises(SftDataError, match="held-out source 'x' has no conversation"):
        holdout_split(convs, source="x", size=3)
    with pytest.raises(SftDataError, match="leaves no training conversation"):
        holdout_split(convs, source="native", size=20)


def test_the_length_policy_is_applied_and_counted():
    convs = [conv(f"q{i}", i=i) for i in range(4)]
    lengths = [10, 50, 30, 51]
    kept, c = apply_length_limit(convs, lengths, max_length=50, policy="drop")
    assert [x["id"] for x in kept] == ["s:0", "s:1", "s:2"] and c == {"too_long": 1, "dropped_long": 1, "truncated": 0}
    kept, c = apply_length_limit(convs, lengths, max_length=20, policy="truncate")
    assert len(kept) == 4 and c == {"too_long": 3, "dropped_long": 0, "truncated": 3}
    with pytest.raises(
        SftDataError,
        match=r"f:1: 50 tokens with the chat template > sft.max_length 20 \(3 "
        r"conversation\(s\) in all\)",
    ):
        apply_length_limit(convs, lengths, max_length=20, policy="error")
