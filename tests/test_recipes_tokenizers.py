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


def test_baselines_come_in_the_order_asked_for():
    cfg = load_params(None, overrides={"data": {"root": str(FIXTURES)}})
    got = tokenizers.baselines(cfg, ["cl100k", "gpt2"])
    assert list(got) == ["cl100k", "gpt2"] and got["gpt2"].vocab_size == 50257


def test_main_tokenizer_from_a_path_under_the_data_root():
    cfg = load_params(None, overrides={"data": {"root": str(FIXTURES)}, "tokens": {"tokenizer": "tokenizers/gpt2"}})
    assert tokenizers.main_tokenizer(cfg).vocab_size == 50257


def test_a_missing_lexicon_file_is_a_clear_error(tmp_path):
    cfg = load_params(None, overrides={"data": {"root": str(tmp_path), "lexicon": "lex"}})
    with pytest.raises(DataError, match="data.lexicon: missing"):
        tokenizers.lexicon_check(cfg)
    assert tokenizers.lexicon_check(load_params(None, overrides={"data": {"lexicon": None}})) is None
