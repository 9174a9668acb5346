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
