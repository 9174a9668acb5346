"""The tokenizer recipe (azllm.recipes.tokenizers): options and the sweep of the params, baselines in the order
asked for, the main tokenizer from tokens.tokenizer under the data root, the lexicon check's clear error."""

import pytest

from azllm.config import load_params
from azllm.data import DataError
from azllm.recipes import tokenizers
from conftest import FIXTURES


def test_sweep_options_cover_every_combination():
    cfg = load_params(
        None,
        overrides={
            "seed": 4,
            "tokenizer": {
                "sweep": {"vocab_sizes": [100, 200], "model_types": ["bpe"], "affix_presplit": [False, True]}
            },
        },
    )
    opts = tokenizers.sweep_options(cfg)
    assert [(o["vocab_size"], o["affix_presplit"]) for o in opts] == [
        (100, False),
        (200, False),
        (100, True),
        (200, True),
    ]
    assert all(o["seed"] == 4 and "sweep" not in o for o in opts)


@pytest.mark.needs_shared
def test_baselines_come_in_the_order_asked_for(shared):
    cfg = load_params(None, overrides={"data": {"root": str(shared)}})
    got = tokenizers.baselines(cfg, ["cl100k", "gpt2"])
    assert list(got) == ["cl100k", "gpt2"] and got["gpt2"].vocab_size == 50257


def test_main_tokenizer_from_a_path_under_the_data_root():
    over = {"data": {"root": str(FIXTURES)}, "tokens": {"tokenizer": "tokenizers/gpt2-2k"}}
    assert tokenizers.main_tokenizer(load_params(None, overrides=over)).vocab_size == 2257


def test_a_missing_lexicon_file_is_a_clear_error(tmp_path):
    cfg = load_params(None, overrides={"data": {"root": str(tmp_path), "lexicon": "lex"}})
    with pytest.raises(DataError, match="data.lexicon: missing"):
        tokenizers.lexicon_check(cfg)
    assert tokenizers.lexicon_check(load_params(None, overrides={"data": {"lexicon": None}})) is None


def test_best_summary_and_text_sizes():
    """The best tokenizer of the sweep at the selected size (lossless, among the trained), its fertility on every
    set by name, the target, and the reference baselines beside it; the sizes of the corpus and the eval sets."""
    cfg = load_params(
        None,
        overrides={"tokenizer": {"vocab_size": 2000, "sweep": {"fertility_target": 2.0, "select_vocab_size": None}}},
    )

    def row(tok, ev, fert, vocab=2000, rt=1.0):
        return {"tokenizer": tok, "eval_set": ev, "fertility": fert, "vocab_size": vocab, "roundtrip": rt}

    rows = [
        row("bpe-2k", "flores", 1.9),
        row("bpe-2k", "xwmt", 2.2),
        row("uni-2k", "flores", 1.8, rt=0.9),  # lossy: never the best
        row("bpe-1k", "flores", 1.7, vocab=1000),  # another size
        row("llama3", "flores", 3.4, vocab=128256),
        row("llama3", "xwmt", 3.9, vocab=128256),
    ]
    trained = {"bpe-2k": None, "uni-2k": None, "bpe-1k": None}
    best = tokenizers.best_summary(cfg, rows, {"flores": [], "xwmt": []}, trained)
    assert best == {
        "best": "bpe-2k",
        "best_vocab_size": 2000,
        "best_fertility": 1.9,
        "selected_on": "flores",
        "best_fertility_by_set": {"flores": 1.9, "xwmt": 2.2},
        "fertility_target": 2.0,
        "target_reached": True,
        "reference_fertility": {"llama3": 3.4},
    }
    sizes = tokenizers.text_sizes(["Salam dünya", "Necəsən?"], {"flores": ["a b c"]})
    assert sizes["corpus"] == {"documents": 2, "words": 3, "characters": 19, "bytes": 22}
    assert sizes["eval_sets"] == {"flores": {"lines": 1, "words": 3}}


@pytest.fixture(scope="module")
def tiny_one(tmp_path_factory):
    """params/tiny.yaml's one-at-a-time table on the fixture corpus, with its eval sets as found."""
    import os

    from azllm.recipes.corpus import eval_sets
    from conftest import REPO

    art = tmp_path_factory.mktemp("art")
    old = os.environ.get("AZLLM_ARTIFACTS")
    os.environ["AZLLM_ARTIFACTS"] = str(art)
    try:
        cfg = load_params(REPO / "params/tiny.yaml", overrides={"data": {"root": str(FIXTURES)}})
        evals, _, _ = eval_sets(cfg)
        raw = tokenizers.raw_eval_lines(cfg)
        rows = tokenizers.one_at_a_time_table(cfg, evals, raw, tokenizers.lexicon_words(cfg))
        yield cfg, evals, raw, {r["change"]: r for r in rows}, rows
    finally:
        os.environ.pop("AZLLM_ARTIFACTS") if old is None else os.environ.__setitem__("AZLLM_ARTIFACTS", old)


def test_one_change_at_a_time_against_the_run_tokenizer(tiny_one):
    """The run's tokenizer first (Δ 0), then each change of the params alone; every raw line round-trips with the
    whitespace kept, and SentencePiece's own stripping loses exactly the lines with a space at an end."""
    cfg, evals, raw, by, rows = tiny_one
    assert [r["change"] for r in rows] == ["the run's tokenizer", *(c.name for c in cfg.tokenizer.sweep.one_at_a_time)]
    base = rows[0]
    assert base["fertility_delta"] == {"flores": 0.0, "xwmt": 0.0}
    assert base["raw_roundtrip_failures"] == {"flores": 0, "xwmt": 0}
    ends = sum(1 for line in raw["flores"] if line != line.strip())
    assert ends == 10 and by["whitespace stripped"]["raw_roundtrip_failures"]["flores"] == ends
    assert by["whitespace stripped"]["fertility"] == base["fertility"]  # normalized text has no such spaces
    assert by["unigram"]["fertility_delta"]["flores"] == pytest.approx(
        by["unigram"]["fertility"]["flores"] - base["fertility"]["flores"]
    )
    assert by["unigram"]["fertility"] != base["fertility"]
    assert 0 < base["morph_recall"] < 1 and 0 < base["lexicon_recall"] < 1 and base["lexicon_precision"] > 0
    raw_row = by["no normalization when encoding"]  # the same tokenizer, measured on the lines as found
    assert raw_row["fertility"] != base["fertility"] and raw_row["lexicon_recall"] == base["lexicon_recall"]
    paths = tokenizers.Paths.of(cfg)  # that tokenizer is row 0's copied (tokenizer_notes), not trained again
    copied, first = paths.one_change(rows.index(raw_row)), paths.one_change(0)
    assert (copied / "sp.model").read_bytes() == (first / "sp.model").read_bytes()
    assert raw_row["train_s"] == base["train_s"] > 0  # the seconds of the training that made it
    assert len(list(paths.tokenizer_notes.glob("*.json"))) <= len(rows) - 1


def test_a_change_replaces_its_keys_whole():
    from azllm.config import OneChange

    cfg = load_params(None, overrides={"corpus": {"mix": {"weights": {"a": 0.0}, "caps": {"b": 5}}}})
    c = tokenizers.changed_config(cfg, OneChange(name="x", tokenizer={"model_type": "unigram"}, mix={"weights": {}}))
    assert c.corpus.mix.weights == {} and c.corpus.mix.caps == {"b": 5} and c.tokenizer.model_type == "unigram"
    assert cfg.corpus.mix.weights == {"a": 0.0}  # the run's config is left as it was


def test_the_frontier_is_every_point_no_other_beats_on_both():
    one = [
        {"change": "base", "fertility": {"f": 1.44}, "morph_recall": 0.15},
        {"change": "worse", "fertility": {"f": 1.50}, "morph_recall": 0.14},
        {"change": "affix", "fertility": {"f": 1.85}, "morph_recall": 0.52},
    ]
    sweep = [
        {"tokenizer": "bpe-64k", "eval_set": "f", "fertility": 1.33, "morph_recall": 0.12},
        {"tokenizer": "bpe-8k", "eval_set": "f", "fertility": 1.9, "morph_recall": 0.2},
        {"tokenizer": "gpt2", "eval_set": "f", "fertility": 3.0, "morph_recall": 0.05},
    ]
    pts = tokenizers.frontier_points(one, sweep, "f", trained={"bpe-64k", "bpe-8k"})
    assert {p["name"] for p in pts} == {"base", "worse", "affix", "bpe-64k", "bpe-8k"}  # baselines are not ours
    assert {p["name"] for p in pts if p["on_frontier"]} == {"base", "affix", "bpe-64k"}


def test_no_evaluation_text_reaches_the_training_sample(tmp_path, monkeypatch):
    """A FLORES line planted in a training document: the corpus stage removes the document, so the sample the
    tokenizers train on shares no 13-word sequence (a short line: the whole line) with any held-out set. The same
    check finds the planted line's sentences when the corpus stage is off."""
    import shutil

    from azllm import data
    from azllm.tokenizer_train import write_sample
    from conftest import REPO

    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "data", root / "data")
    flores = (root / "data/az/dev/flores200.dev.azj_Latn.txt").read_text(encoding="utf-8").splitlines()
    planted = max(flores[:50], key=lambda x: len(x.split()))
    with open(root / "data/az/train/web_articles.txt", "a", encoding="utf-8") as f:
        f.write(f"\nBu gün xəbərlərdə belə yazılıb: {planted} Sonra başqa mövzuya keçdilər.\n")
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    for enabled in (True, False):
        cfg = load_params(
            REPO / "params/tiny.yaml",
            overrides={"data": {"root": str(root)}, "corpus": {"enabled": enabled}, "run_name": f"leak{enabled}"},
        )
        docs = data.iter_documents(tokenizers.training_source(cfg))
        write_sample(docs, tokenizers.Paths(cfg).tokenizer_sample, max_lines=0, seed=cfg.seed)
        leak = {r["held_out"]: r["sample_lines"] for r in tokenizers.sample_leakage(cfg)}
        flores_sets = [k for k in leak if "flores" in k]  # FLORES dev itself and the tasks built from it
        assert len(flores_sets) >= 3, leak
        assert all((leak[k] > 0) is not enabled for k in flores_sets), (enabled, leak)
        assert all(v == 0 for k, v in leak.items() if k not in flores_sets), leak
