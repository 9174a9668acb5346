from collections import Counter

import pytest

from azllm.metrics import best_variant, morph_alignment, segmentations, token_boundaries, tokenizer_metrics, word_prefix
from azllm.text import normalize
from azllm.tokenizer import Tok, load_tokenizer
from conftest import FIXTURES


def char_tok():
    """A character-level tokenizer (id = code point): every character boundary is a token boundary."""
    return Tok(
        name="chars",
        kind="test",
        vocab_size=0x110000,
        encode_fn=lambda t: [ord(c) for c in t],
        decode_fn=lambda ids: "".join(map(chr, ids)),
    )


@pytest.fixture(scope="module")
def flores(shared):
    return _flores(shared / "data/az/dev")


@pytest.fixture(scope="module")
def flores_fixture():
    """The first 200 FLORES-200 dev lines of the committed fixture corpus."""
    return _flores(FIXTURES / "data/az/dev")


def _flores(d):
    az = [normalize(x) for x in (d / "flores200.dev.azj_Latn.txt").read_text(encoding="utf-8").splitlines()]
    en = [normalize(x) for x in (d / "flores200.dev.eng_Latn.txt").read_text(encoding="utf-8").splitlines()]
    return az, en


def test_counts_on_a_hand_example():
    m = tokenizer_metrics(char_tok(), ["ev  ", "", "bu ev"], ["ab", "", "c"])
    # lines "ev" and "bu ev": 2 + 5 tokens (the space is a token), 3 words, 7 characters, 7 bytes
    assert m["lines"] == 2 and m["tokens"] == 7 and m["words"] == 3
    assert m["fertility"] == pytest.approx(7 / 3)
    assert m["continued_words"] == 1.0  # every word has 2 characters
    assert m["chars_per_token"] == 1.0 and m["bytes_per_token"] == 1.0
    assert m["parity"] == pytest.approx(7 / 3)  # English side: "ab" + "c" = 3 tokens
    assert m["roundtrip"] == 1.0


def test_bytes_per_token_counts_utf8():
    m = tokenizer_metrics(char_tok(), ["əş"])
    assert m["chars_per_token"] == 1.0 and m["bytes_per_token"] == 2.0


@pytest.mark.needs_shared
def test_fertility_equals_reference_count(shared, flores_fixture, monkeypatch):
    """The headline metric against tiktoken's own count, on shared/tokenizers' cl100k_base file."""
    import tiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(shared / "tokenizers/tiktoken_cache"))
    az, en = flores_fixture
    m = tokenizer_metrics(load_tokenizer("tiktoken:cl100k_base"), az, en)
    enc = tiktoken.get_encoding("cl100k_base")
    ref_tokens = sum(len(enc.encode_ordinary(x)) for x in az)
    assert m["tokens"] == ref_tokens
    assert m["fertility"] == pytest.approx(ref_tokens / sum(len(x.split()) for x in az))
    assert m["parity"] == pytest.approx(ref_tokens / sum(len(enc.encode_ordinary(x)) for x in en))


@pytest.mark.needs_shared
@pytest.mark.parametrize(
    "name,spec,lo,hi",
    [
        ("gpt2", "tokenizers/gpt2", 4.8, 5.0),
        ("llama2", "tokenizers/llama2/tokenizer.model", 4.1, 4.3),
        ("llama3", "tokenizers/llama3.1", 3.3, 3.5),
        ("xlm-r", "tokenizers/xlm-roberta/tokenizer.json", 1.75, 1.85),
    ],
)
def test_published_flores_fertility(shared, flores, name, spec, lo, hi):
    """The published FLORES-200 azj_Latn numbers (shared/data/README.md) are reproduced."""
    m = tokenizer_metrics(load_tokenizer(shared / spec), flores[0], morph=False)
    assert lo <= m["fertility"] <= hi


def test_word_prefix_of_gpt2_and_characters():
    assert word_prefix(load_tokenizer(FIXTURES / "tokenizers/gpt2-2k")) == " "
    assert word_prefix(char_tok()) == ""


@pytest.mark.needs_shared
def test_word_prefix_of_sentencepiece(shared):
    assert word_prefix(load_tokenizer(shared / "tokenizers/llama2/tokenizer.model")) == ""


@pytest.mark.needs_shared
def test_continued_words_match_per_word_encoding(shared, flores):
    tok = load_tokenizer(shared / "tokenizers/llama3.1")
    lines = flores[0][:50]
    words = [w for x in lines for w in x.split()]
    expected = sum(len(tok.encode(" " + w)) >= 2 for w in words) / len(words)
    assert tokenizer_metrics(tok, lines, morph=False)["continued_words"] == pytest.approx(expected)


@pytest.mark.needs_shared
def test_unk_and_byte_fallback_rates(shared):
    tok = load_tokenizer(shared / "tokenizers/llama2/tokenizer.model")  # SentencePiece with byte fallback
    m = tokenizer_metrics(tok, ["ə 🙂"], morph=False)
    ids = tok.encode("ə 🙂")
    expected = sum(i in tok.fallback_ids for i in ids) / len(ids)
    assert expected > 0 and m["byte_fallback_rate"] == pytest.approx(expected)
    assert m["unk_rate"] == 0


def test_morph_alignment_with_character_tokens():
    # evlərimizdən: predicted boundaries at 2, 5, 9; characters cut everywhere (11 internal boundaries)
    m = morph_alignment(char_tok(), Counter({"evlərimizdən": 2, "və": 5}))
    assert m["morph_recall"] == 1.0 and m["morph_precision"] == pytest.approx(3 / 11) and m["morph_words"] == 2
    assert token_boundaries(char_tok(), [ord(c) for c in "ev"], "ev") == {1}


def test_best_variant_requires_lossless_round_trip():
    rows = [
        {"tokenizer": "a", "eval_set": "f", "vocab_size": 8, "fertility": 1.0, "roundtrip": 0.99},
        {"tokenizer": "b", "eval_set": "f", "vocab_size": 8, "fertility": 1.5, "roundtrip": 1.0},
        {"tokenizer": "c", "eval_set": "f", "vocab_size": 16, "fertility": 1.2, "roundtrip": 1.0},
    ]
    assert best_variant(rows, "f", 8)["tokenizer"] == "b"
    assert best_variant(rows, "f")["tokenizer"] == "c"


def test_segmentations_show_pieces():
    seg = segmentations({"gpt2": load_tokenizer(FIXTURES / "tokenizers/gpt2-2k")}, ["evlərimizdən"])
    assert seg["evlərimizdən"]["gpt2"].endswith(")")


def test_affix_comparison_pairs_variants():
    from azllm.metrics import affix_comparison

    def row(n, f, r):
        return {"tokenizer": n, "eval_set": "f", "fertility": f, "morph_recall": r, "morph_precision": r / 2}

    rows = [row("bpe-8k", 1.5, 0.1), row("bpe-8k-affix", 1.8, 0.5), row("bpe-16k", 1.4, 0.1)]
    out = affix_comparison(rows, "f", ["bpe-8k", "bpe-8k-affix", "bpe-16k"])
    assert out == [
        {
            "variant": "bpe-8k",
            "fertility": 1.5,
            "fertility_affix": 1.8,
            "morph_recall": 0.1,
            "morph_recall_affix": 0.5,
            "morph_precision": 0.05,
            "morph_precision_affix": 0.25,
        }
    ]
