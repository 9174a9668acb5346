"""The token-file format (azllm.tokens.format): the id dtype at the uint16/uint32 boundary, the header, and files
that are truncated or belong to another tokenizer refused."""

import numpy as np
import pytest
from tokens_helpers import REPO, _split_docs, _word_level, corpus, encoded, tok, tok2  # noqa: F401

from azllm.tokens import HEADER_SIZE, TokenFile, TokenFileError, encode_corpus, read_header, token_dtype


def test_token_dtype_boundary():
    assert token_dtype(1) == np.uint16 and token_dtype(65536) == np.uint16
    assert token_dtype(65537) == np.uint32 and token_dtype(2**32) == np.uint32
    with pytest.raises(ValueError):
        token_dtype(0)


@pytest.mark.parametrize("vocab_size,dtype", [(65536, np.uint16), (65537, np.uint32)])
def test_uint16_uint32_files_at_the_65536_boundary(tmp_path, vocab_size, dtype):
    t = _word_level(tmp_path / "tok", vocab_size)
    assert t.vocab_size == vocab_size and t.eos_id == 2
    top = vocab_size - 1  # 65535 fits uint16; 65536 needs uint32
    docs = [f"w{top} w3 w{top - 1}", "w4", f"w{top}"]
    r = encode_corpus(docs, t, tmp_path / "out", val_fraction=0.0, progress=False)
    tf = TokenFile(r["train"], t)
    assert tf.dtype == dtype and read_header(r["train"])["dtype"] == np.dtype(dtype).name
    assert r["train"].stat().st_size == HEADER_SIZE + tf.n_tokens * np.dtype(dtype).itemsize
    assert np.asarray(tf.tokens).tolist() == [top, 3, top - 1, 2, 4, 2, top, 2]


def test_truncated_file_is_refused(encoded, tmp_path):
    data = encoded["train"].read_bytes()
    bad = tmp_path / "train.bin"
    bad.write_bytes(data[:-3])
    with pytest.raises(TokenFileError, match="truncated"):
        TokenFile(bad)
    bad.write_bytes(data[:100])
    with pytest.raises(TokenFileError, match="truncated"):
        TokenFile(bad)
    bad.write_bytes(b"\0" * 2000)
    with pytest.raises(TokenFileError, match="not an azllm token file"):
        TokenFile(bad)
    with pytest.raises(TokenFileError, match="no such token file"):
        TokenFile(tmp_path / "missing.bin")


def test_file_from_another_tokenizer_is_refused(encoded, tok, tok2):
    TokenFile(encoded["train"], tok)
    TokenFile(encoded["train"], fingerprint=tok.fingerprint)
    with pytest.raises(TokenFileError, match="fingerprint"):
        TokenFile(encoded["train"], tok2)
    with pytest.raises(TokenFileError, match="fingerprint"):
        TokenFile(encoded["train"], fingerprint="0" * 64)
