"""Loading: every baseline kind, our GPT-2 loader against tiktoken, a missing baseline's clear error. Training
our own tokenizers: tests/test_tokenizer_train.py."""

import os

import pytest

from azllm.text import normalize
from azllm.tokenizer import TokenizerError, load_tokenizer


@pytest.fixture(scope="module")
def dev_lines(data_root):
    d = data_root / "data/az/dev"
    return [normalize(x) for x in (d / "flores200.dev.azj_Latn.txt").read_text(encoding="utf-8").splitlines() if x]


def test_gpt2_vocab_merges_equals_tiktoken_reference(shared, dev_lines, monkeypatch):
    """Our GPT-2 loader against tiktoken's own gpt2 encoding, both from shared/tokenizers."""
    import tiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(shared / "tokenizers/tiktoken_cache"))
    ours = load_tokenizer(shared / "tokenizers/gpt2")
    ref = tiktoken.get_encoding("gpt2")
    assert all(ours.encode(x) == ref.encode_ordinary(x) for x in dev_lines[:500])
    assert ours.eos_id == ref.eot_token == 50256


def test_every_baseline_kind_loads(shared, monkeypatch):
    import sentencepiece as spm
    from tokenizers import Tokenizer

    T = shared / "tokenizers"
    text = "Azərbaycan Respublikasının paytaxtı Bakı şəhəridir."
    sp = spm.SentencePieceProcessor(model_file=str(T / "llama2/tokenizer.model"))
    assert load_tokenizer(T / "llama2/tokenizer.model").encode(text) == sp.encode(text)
    hf = Tokenizer.from_file(str(T / "xlm-roberta/tokenizer.json"))
    assert (
        load_tokenizer(T / "xlm-roberta/tokenizer.json").encode(text) == hf.encode(text, add_special_tokens=False).ids
    )
    llama3 = load_tokenizer(T / "llama3.1")
    assert llama3.vocab_size == 128256 and llama3.decode(llama3.encode(text)) == text
    assert 128000 not in llama3.encode(text)  # no BOS: counts never include special tokens
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    cache = T / "tiktoken_cache"
    assert load_tokenizer("tiktoken:cl100k_base", tiktoken_cache=cache).vocab_size > 100000
    o200k = load_tokenizer("o200k_base", tiktoken_cache=cache)
    assert o200k.decode(o200k.encode(text)) == text
    assert "TIKTOKEN_CACHE_DIR" not in os.environ  # set for the call only, never left behind


def test_missing_baseline_is_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(TokenizerError, match="not found"):
        load_tokenizer(tmp_path / "nope" / "tokenizer.model")
    from azllm.config import load_params
    from azllm.recipes.tokenizers import baselines

    def cfg(entry):
        return load_params(None, overrides={"data": {"root": str(tmp_path)}, "baselines": {"x": entry}})

    with pytest.raises(TokenizerError, match="baseline tokenizer 'x' not found"):
        baselines(cfg({"path": "tokenizers/nope"}))
    # a missing local path falls back to the hub id, through AutoTokenizer.from_pretrained; offline it fails clearly
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import time
    with pytest.raises(TokenizerError, match="'azllm-test/does-not-exist' from the Hugging Face Hub"):
        baselines(cfg({"path": "tokenizers/nope", "hub": "azllm-test/does-not-exist"}))
