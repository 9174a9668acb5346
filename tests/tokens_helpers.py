"""Shared pieces of the token-file tests (tests/test_tokens_*.py): a corpus slice, two real tokenizers, one
encoded pair of files. Import the fixtures into a test module (``from tokens_helpers import corpus, encoded, tok``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from azllm.tokenizer import load_tokenizer
from azllm.tokenizer_train import train_tokenizer
from azllm.tokens import TokenFile, encode_corpus
from conftest import FIXTURES, TINY_MODEL, run_notebooks  # noqa: F401

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def corpus() -> list[str]:
    """~250 KB of the fixture corpus (every file of the shared corpus represented), normalized."""
    from azllm.data import iter_documents, resolve_source

    r = resolve_source({"path": "data/az/train/*.txt", "max_bytes_per_file": 20_000}, FIXTURES)
    return list(iter_documents(r))


@pytest.fixture(scope="session")
def tok(corpus, tmp_path_factory):
    folder = train_tokenizer(corpus, tmp_path_factory.mktemp("tok") / "tok", vocab_size=600, model_type="unigram")
    return load_tokenizer(folder)


@pytest.fixture(scope="session")
def tok2(corpus, tmp_path_factory):
    """Another real tokenizer (other vocab size): its files must be refused by ``tok``."""
    folder = train_tokenizer(corpus, tmp_path_factory.mktemp("tok2") / "tok", vocab_size=500, model_type="unigram")
    return load_tokenizer(folder)


@pytest.fixture(scope="session")
def encoded(corpus, tok, tmp_path_factory):
    out = tmp_path_factory.mktemp("enc")
    r = encode_corpus(corpus, tok, out, val_fraction=0.1, seed=0, progress=False)
    return r


def _word_level(tmp: Path, vocab_size: int):
    """A real HF WordLevel tokenizer with exactly ``vocab_size`` ids (``</s>`` = 2), saved and loaded."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"w{i}": i for i in range(3, vocab_size)})
    t = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tmp.mkdir(parents=True, exist_ok=True)
    t.save(str(tmp / "tokenizer.json"))
    return load_tokenizer(tmp)


def _split_docs(tf: TokenFile) -> list[np.ndarray]:
    ids = np.asarray(tf.tokens)
    ends = np.flatnonzero(ids == tf.eos_id)
    assert ends.size and ends[-1] == ids.size - 1, "every document must end with EOS"
    return np.split(ids, ends + 1)[:-1]
