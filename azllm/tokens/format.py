"""The token-file format (version 1): header layout, dtype, the per-document split. See :mod:`azllm.tokens`."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

import numpy as np

FORMAT_VERSION = 1
HEADER_SIZE = 1024
MAGIC = b"AZTOKENS"
SPLITS = ("train", "val")
META_NAME = "tokens.json"


class TokenFileError(ValueError):
    """A token file is missing, truncated, foreign or was made with another tokenizer."""


# ------------------------------------------------------------------------------------------------ small pieces


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds every id of a vocabulary.

    >>> token_dtype(65536), token_dtype(65537)
    (dtype('uint16'), dtype('uint32'))
    """
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    if vocab_size <= 2**16:
        return np.dtype("<u2")
    if vocab_size <= 2**32:
        return np.dtype("<u4")
    raise ValueError(f"vocab_size {vocab_size} does not fit in uint32")


def doc_digests(docs: list[str], seed: int) -> bytes:
    """The 16-byte keyed blake2b digests of ``docs``, concatenated (one C call per document)."""
    key = str(int(seed)).encode()
    b2 = hashlib.blake2b
    return b"".join([b2(d.encode("utf-8"), digest_size=16, key=key).digest() for d in docs])


def val_flags(digests: bytes, val_fraction: float) -> np.ndarray:
    """``True`` where a document goes to val: the first 8 digest bytes (little-endian uint64) are below
    ``val_fraction * 2**64``, compared in integers (exact, the same in :func:`split_of`)."""
    u = np.frombuffer(digests, dtype="<u8")[::2]
    thr = int(round(float(val_fraction) * 2**64))
    if thr >= 2**64:
        return np.ones(u.shape, dtype=bool)
    return u < np.uint64(thr)


def split_of(doc: str, val_fraction: float = 0.01, seed: int = 0) -> str:
    """The split (``"train"`` or ``"val"``) a document goes to: a keyed hash of its text, nothing else.

    >>> split_of("Bakı Azərbaycanın paytaxtıdır.", 0.0), split_of("Bakı Azərbaycanın paytaxtıdır.", 1.0)
    ('train', 'val')
    """
    return "val" if val_flags(doc_digests([doc], seed), val_fraction)[0] else "train"


def header_bytes(meta: dict) -> bytes:
    blob = json.dumps(meta, sort_keys=True, ensure_ascii=True).encode()
    if 16 + len(blob) > HEADER_SIZE:
        raise TokenFileError(f"token file header too long ({len(blob)} bytes)")
    return (MAGIC + struct.pack("<II", FORMAT_VERSION, len(blob)) + blob).ljust(HEADER_SIZE, b"\0")


def read_header(path: str | os.PathLike) -> dict:
    """The JSON header of a token file, checked for magic and version.

    >>> read_header("artifacts/tiny/tokens/train.bin")["n_tokens"]  # doctest: +SKIP
    1234567
    """
    path = Path(path)
    if not path.is_file():
        raise TokenFileError(f"{path}: no such token file (run azllm.tokens.encode_corpus first)")
    with open(path, "rb") as f:
        head = f.read(HEADER_SIZE)
    if len(head) < 16 or head[:8] != MAGIC:
        raise TokenFileError(
            f"{path}: not an azllm token file (bad magic {head[:8]!r}); re-encode the corpus "
            "with azllm.tokens.encode_corpus"
        )
    version, n = struct.unpack("<II", head[8:16])
    if version != FORMAT_VERSION:
        raise TokenFileError(
            f"{path}: token file format version {version}, this azllm reads version "
            f"{FORMAT_VERSION}; re-encode the corpus"
        )
    if len(head) < HEADER_SIZE or 16 + n > HEADER_SIZE:
        raise TokenFileError(f"{path}: truncated header ({len(head)} of {HEADER_SIZE} bytes); re-encode")
    try:
        return json.loads(head[16 : 16 + n])
    except json.JSONDecodeError as e:
        raise TokenFileError(f"{path}: corrupt header ({e}); re-encode the corpus") from None
