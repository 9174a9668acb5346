"""The scale benchmark's library (azllm.bench.scale): generated text that is new by the mix's own rule, seeded and
written once; the growth fit against exact curves."""

import json

import numpy as np
import pytest

from azllm.bench.scale import MAX_SEEN, WordBigrams, extrapolate, generate_text, growth
from azllm.corpus.mix import sentence_3grams, split_sentences
from conftest import FIXTURES

MODEL = sorted(str(p) for p in (FIXTURES / "data/az/train").glob("*.txt"))


def test_generated_sentences_are_new_by_the_mix_rule_and_seeded(tmp_path):
    a = generate_text(MODEL, tmp_path / "a", 300_000, seed=3)
    assert a["bytes"] >= 300_000 and a["docs"] > 10 and a["rejected_sentences"] >= 0
    for f in a["files"]:
        seen: set[str] = set()
        for line in (tmp_path / "a" / f["file"]).read_text(encoding="utf-8").splitlines():
            sentences = split_sentences(line)
            assert 4 <= len(sentences) <= 40
            for s in sentences:
                grams = sentence_3grams(s)
                assert sum(g in seen for g in grams) < MAX_SEEN * len(grams), s
                seen.update(grams)
    b = generate_text(MODEL, tmp_path / "b", 300_000, seed=3)
    c = generate_text(MODEL, tmp_path / "c", 300_000, seed=4)
    text = lambda d: (tmp_path / d / "gen_00.txt").read_bytes()  # noqa: E731
    assert text("a") == text("b") != text("c")
    assert a["key"] == b["key"] != c["key"]


def test_a_complete_folder_is_reused_and_an_incomplete_one_written_again(tmp_path):
    first = generate_text(MODEL, tmp_path, 100_000, seed=0)
    stamp = (tmp_path / "gen_00.txt").stat().st_mtime_ns
    assert generate_text(MODEL, tmp_path, 100_000, seed=0) == first
    assert (tmp_path / "gen_00.txt").stat().st_mtime_ns == stamp
    (tmp_path / "generated.json").unlink()  # killed before its marker: written again, the same
    before = (tmp_path / "gen_00.txt").read_bytes()
    again = generate_text(MODEL, tmp_path, 100_000, seed=0)
    assert again["key"] == first["key"] and (tmp_path / "gen_00.txt").read_bytes() == before
    assert json.loads((tmp_path / "generated.json").read_text())["bytes"] == first["bytes"]


def test_the_chain_only_takes_steps_seen_in_the_text():
    m = WordBigrams(["a b c a b d. e f"])
    ids = m.sample(np.random.default_rng(0), lanes=50, steps=20)
    pairs = {("a", "b"), ("b", "c"), ("c", "a"), ("b", "d."), ("d.", "e"), ("e", "f")}
    words = m.vocab[ids]
    for lane in range(50):
        for x, y in zip(words[:-1, lane], words[1:, lane]):
            assert (x, y) in pairs or x == "f"  # "f" has no successor: the chain restarts anywhere
    with pytest.raises(ValueError, match="two words"):
        WordBigrams(["one"])


def test_growth_recovers_a_power_law_and_extrapolates_on_it():
    sizes = [64, 256, 1024]
    g = growth(sizes, [3 * s**0.8 for s in sizes])
    assert g["exponent"] == pytest.approx(0.8) and g["coefficient"] == pytest.approx(3) and g["r2"] == pytest.approx(1)
    assert extrapolate(g, 15_000) == pytest.approx(3 * 15_000**0.8)
    with pytest.raises(ValueError, match="two or more"):
        growth([64, 64], [1, 2])
