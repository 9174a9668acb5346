"""Token files: stream a corpus through a tokenizer into one binary file per split, map it back, serve batches.

Text -> ``train.bin`` / ``val.bin`` -> ``np.memmap`` -> random windows, the way nanoGPT / llm.c feed a model.

File format (version 1). Each ``.bin`` file is a 1024-byte header followed by the token ids::

    bytes 0-7     magic b"AZTOKENS"
    bytes 8-11    uint32 little-endian format version (1)
    bytes 12-15   uint32 length L of the JSON header
    bytes 16-16+L JSON: {"format_version", "split", "dtype", "n_tokens", "n_docs", "vocab_size", "eos_id",
                  "tokenizer_fingerprint", "tokenizer_name", "key", "docs_sha256", "val_fraction", "seed"}
    ... zeros up to byte 1024, then n_tokens ids in ``dtype`` (little-endian), documents one after the other,
    each followed by the EOS id.

``head -c 1024 train.bin`` shows the header. The sidecar ``tokens.json`` (written last) repeats both headers and
adds what is not needed to read a file (inputs, timings). Decisions:

- **dtype**: ``uint16`` when ``vocab_size <= 65536`` (ids 0..65535), otherwise ``uint32`` (:func:`token_dtype`).
- **EOS after every document**, so the model sees where documents end and windows may cross them knowingly.
  A tokenizer without an EOS id is refused.
- **Split per document** by a keyed hash: ``blake2b(utf8(doc), key=str(seed))``; a document goes to ``val`` when
  the first 8 bytes of the digest, read as a fraction of 2**64, are below ``val_fraction``. The decision depends
  only on the text, the seed and the fraction, never on the order or the position, so identical documents (exact
  duplicates) always land in the same split and nothing leaks; it is stable when the corpus grows.
- **Idempotent**: ``key`` = sha256 of (format version, tokenizer fingerprint, val_fraction, seed, ``docs_sha256``)
  where ``docs_sha256`` is a running sha256 over the 16-byte blake2b digest of every document in order, computed
  during the pass (one hash per document, no second read). A re-run is skipped when the existing files carry the
  same key. Knowing the key needs a pass over the documents, so two cheaper checks come first: (1) ``inputs``, a
  JSON-able description given by the caller that pins the documents (for local files: their sha256s plus the
  source options, see :func:`encode_source`); when the sidecar holds the same ``inputs`` key and the files verify,
  nothing is read at all. (2) When ``docs`` is re-iterable (a list, or a zero-argument callable returning a fresh
  iterator), a hash-only pass (no tokenization) decides. A one-shot generator without ``inputs`` is encoded again;
  if the result has the same key the existing files are kept untouched.
- **Atomic**: ids are written to ``.<name>.<pid>.tmp`` beside the final files and renamed at the end (val, then
  train, then the sidecar). A killed run leaves only temporary files, which the next run deletes when their
  process is gone; each final file is always complete and self-describing.
- **Flat memory**: the corpus is cut into chunks of at most ``chunk_docs`` documents / ``chunk_chars`` characters;
  at most ``2 * num_workers`` chunks are in flight; ids go to disk as soon as their chunk is done.
- **Parallel**: ``num_workers`` threads each encode whole chunks; the tokenizers release the GIL while encoding
  (SentencePiece, HF tokenizers, tiktoken), so threads use every core with no pickling and no process start-up.
  Results are written in submission order, so the output is byte-identical for any ``num_workers``.
  Backend: when the tokenizer is a folder holding ``sp.model`` (our trained tokenizers), the SentencePiece engine
  is used directly (one thread per call); it gives the same ids as the folder's ``tokenizer.json`` (checked on the
  first documents of every run) and is several times faster than HF tokenizers' Unigram on this corpus
  (measured by :mod:`azllm.bench.encoder`). Otherwise ``Tok.encode_batch`` is used.
  Measured on 2 cores (``python -m azllm.bench.encoder``): with the documents in memory the threads
  encode at 0.97x the SentencePiece batch-encode limit, and at about 0.9x streaming them from a file (reading
  and hashing take the rest), so worker processes, which would add pickling and start-up on top, were not
  built. The serial part left is the caller's document iterator (reading, :func:`azllm.text.normalize`).

Reading: :class:`TokenFile` maps a file read-only and checks magic, version, size and (when given) the tokenizer
fingerprint. :meth:`TokenFile.get_batch` returns random windows for a custom training loop,
:meth:`TokenFile.iter_sequential` covers a split once for evaluation and :class:`TokenWindowDataset` serves fixed
windows to the Hugging Face Trainer.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import struct
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from .utils import atomic_write_json, json_hash
from .utils import progress as progress_bar

__all__ = ["FORMAT_VERSION", "HEADER_SIZE", "TokenFileError", "token_dtype", "split_of", "encode_corpus",
           "encode_source", "read_header", "TokenFile", "TokenWindowDataset", "corpus_stats"]

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


def _digests(docs: list[str], seed: int) -> bytes:
    """The 16-byte keyed blake2b digests of ``docs``, concatenated (one C call per document)."""
    key = str(int(seed)).encode()
    b2 = hashlib.blake2b
    return b"".join([b2(d.encode("utf-8"), digest_size=16, key=key).digest() for d in docs])


def _val_flags(digests: bytes, val_fraction: float) -> np.ndarray:
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
    return "val" if _val_flags(_digests([doc], seed), val_fraction)[0] else "train"


def _header_bytes(meta: dict) -> bytes:
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
        raise TokenFileError(f"{path}: not an azllm token file (bad magic {head[:8]!r}); re-encode the corpus "
                             "with azllm.tokens.encode_corpus")
    version, n = struct.unpack("<II", head[8:16])
    if version != FORMAT_VERSION:
        raise TokenFileError(f"{path}: token file format version {version}, this azllm reads version "
                             f"{FORMAT_VERSION}; re-encode the corpus")
    if len(head) < HEADER_SIZE or 16 + n > HEADER_SIZE:
        raise TokenFileError(f"{path}: truncated header ({len(head)} of {HEADER_SIZE} bytes); re-encode")
    try:
        return json.loads(head[16:16 + n])
    except json.JSONDecodeError as e:
        raise TokenFileError(f"{path}: corrupt header ({e}); re-encode the corpus") from None


# --------------------------------------------------------------------------------------------------- encoders

def _sp_processor(tok):
    """The SentencePiece processor behind a tokenizer folder, or None."""
    if tok.kind == "hf" and tok.path and (Path(tok.path) / "sp.model").is_file():
        import sentencepiece as spm

        return spm.SentencePieceProcessor(model_file=str(Path(tok.path) / "sp.model"))
    return None


def _chunk_encoder(tok, probe: list[str]) -> tuple[Callable[[list[str]], list[list[int]]], str]:
    """Pick the fastest exact batch encoder for ``tok``; returns ``(encode, backend name)``.

    The SentencePiece engine of a folder is used only if it gives exactly ``tok``'s ids on ``probe``.
    """
    sp = _sp_processor(tok)
    if sp is not None and sp.get_piece_size() == tok.vocab_size:
        enc = lambda texts: sp.encode(texts, num_threads=1)  # noqa: E731
        if all(a == b for a, b in zip(enc(probe), tok.encode_batch(probe))):
            return enc, "sentencepiece"
    return tok.encode_batch, tok.kind


def _encode_chunk(encode, texts: list[str], flags: list[bool], eos: int, dtype: np.dtype, vocab_size: int):
    """Encode one chunk; return ``(train_ids, val_ids, n_val_docs)`` as flat arrays with EOS after each doc."""
    ids = encode(texts)
    out = []
    for want_val in (False, True):
        sel = [d for d, v in zip(ids, flags) if v is want_val]
        n = sum(map(len, sel)) + len(sel)
        try:
            arr = np.fromiter(itertools.chain.from_iterable(x for d in sel for x in (d, (eos,))), dtype=dtype,
                              count=n)
        except OverflowError as e:  # an id outside [0, max of dtype]
            raise TokenFileError(f"tokenizer produced an id outside its vocabulary ({e})") from None
        if n and arr.max() >= vocab_size:
            raise TokenFileError(f"tokenizer produced id {int(arr.max())} outside its vocabulary "
                                 f"(vocab_size={vocab_size})")
        out.append(arr)
    return out[0], out[1], sum(flags)


def _chunks(docs: Iterable[str], chunk_docs: int, chunk_chars: int) -> Iterator[list[str]]:
    buf, chars = [], 0
    for d in docs:
        if not isinstance(d, str):
            raise TypeError(f"documents must be str, got {type(d).__name__}")
        if not d:
            continue
        buf.append(d)
        chars += len(d)
        if len(buf) >= chunk_docs or chars >= chunk_chars:
            yield buf
            buf, chars = [], 0
    if buf:
        yield buf


def _tmp_name(final: Path) -> Path:
    return final.with_name(f".{final.name}.{os.getpid()}.tmp")


def _clean_stale_tmp(out_dir: Path) -> None:
    """Delete temporary files left by killed runs (their process no longer exists)."""
    for p in out_dir.glob(".*.tmp"):
        m = re.match(r"^\.(.+)\.(\d+)\.tmp$", p.name)
        if not m or not m.group(1).endswith((".bin", ".json")):
            continue
        pid = int(m.group(2))
        alive = pid != os.getpid()
        if alive:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                alive = False
            except PermissionError:
                pass
        if not alive:
            p.unlink(missing_ok=True)


def _existing(out_dir: Path) -> dict | None:
    """The sidecar of a complete earlier run whose files still verify, else None."""
    try:
        meta = json.loads((out_dir / META_NAME).read_text())
        for s in SPLITS:
            h = read_header(out_dir / f"{s}.bin")
            if h.get("key") != meta.get("key"):
                return None
            TokenFile(out_dir / f"{s}.bin")  # size check
        return meta
    except (OSError, ValueError, KeyError):
        return None


def _result(out_dir: Path, meta: dict, skipped: bool, seconds: float, tokens_per_s: float) -> dict:
    return {"train": out_dir / "train.bin", "val": out_dir / "val.bin",
            "train_tokens": meta["splits"]["train"]["n_tokens"], "val_tokens": meta["splits"]["val"]["n_tokens"],
            "train_docs": meta["splits"]["train"]["n_docs"], "val_docs": meta["splits"]["val"]["n_docs"],
            "skipped": skipped, "seconds": seconds, "tokens_per_s": tokens_per_s, "key": meta["key"],
            "docs_sha256": meta["docs_sha256"], "dtype": meta["dtype"], "backend": meta.get("backend"),
            "meta": out_dir / META_NAME}


def encode_corpus(
    docs: Iterable[str] | Callable[[], Iterable[str]],
    tokenizer,
    out_dir: str | os.PathLike,
    *,
    val_fraction: float = 0.01,
    seed: int = 0,
    num_workers: int | None = None,
    chunk_docs: int = 1024,
    chunk_chars: int = 1 << 20,
    inputs: Any = None,
    force: bool = False,
    progress: bool = True,
) -> dict:
    """Encode documents into ``out_dir/train.bin`` and ``out_dir/val.bin`` (see the module docstring).

    ``docs``: already-normalized documents (an iterable, or a zero-argument callable returning one);
    ``tokenizer``: an :class:`azllm.tokenizer.Tok`; ``inputs``: optional JSON-able description that pins the
    documents (file sha256s + source options), which lets a re-run skip without reading them;
    ``num_workers``: encoding threads (default: all cores).

    Steps: skip check (:func:`_unchanged`) -> write (:func:`_write_splits`) -> finalize (:func:`_finalize`).

    Returns ``{"train": Path, "val": Path, "train_tokens", "val_tokens", "train_docs", "val_docs", "skipped",
    "seconds", "tokens_per_s", "key", "docs_sha256", "dtype", "backend", "meta"}``.

    >>> r = encode_corpus(["Salam dünya.", "Bakı"], tok, "artifacts/demo/tokens", progress=False)  # doctest: +SKIP
    >>> r["train_docs"] + r["val_docs"], r["dtype"]  # doctest: +SKIP
    (2, 'uint16')
    """
    if not 0.0 <= float(val_fraction) <= 1.0:
        raise ValueError(f"val_fraction must be in [0, 1], got {val_fraction}")
    if tokenizer.eos_id is None:
        raise TokenFileError(f"tokenizer {tokenizer.name!r} has no EOS id; token files end every document with EOS")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clean_stale_tmp(out_dir)
    t0 = time.perf_counter()
    dtype = token_dtype(tokenizer.vocab_size)
    options = {"format_version": FORMAT_VERSION, "tokenizer": tokenizer.fingerprint,
               "val_fraction": float(val_fraction), "seed": int(seed), "dtype": dtype.name}
    inputs_key = json_hash({"options": options, "inputs": inputs}, n=None) if inputs is not None else None
    chunking = (int(chunk_docs), int(chunk_chars))
    old = None if force else _existing(out_dir)
    if old is not None and _unchanged(out_dir, old, docs, options, inputs_key, chunking):
        return _result(out_dir, old, True, time.perf_counter() - t0, 0.0)
    num_workers = max(1, int(num_workers or os.cpu_count() or 1))
    written = _write_splits(docs() if callable(docs) else docs, tokenizer, out_dir, dtype=dtype,
                            val_fraction=float(val_fraction), seed=int(seed), num_workers=num_workers,
                            chunking=chunking, progress=progress)
    key = json_hash({"options": options, "docs": written["docs_sha256"]}, n=None)
    headers = {s: _split_header(s, written, key, tokenizer, dtype, val_fraction, seed) for s in SPLITS}
    seconds = time.perf_counter() - t0
    n_tok = sum(h["n_tokens"] for h in headers.values())
    meta = {"key": key, "inputs_key": inputs_key, "options": options, "docs_sha256": written["docs_sha256"],
            "dtype": dtype.name, "backend": written["backend"], "num_workers": num_workers, "splits": headers,
            "inputs": inputs, "seconds": seconds, "tokens_per_s": n_tok / max(seconds, 1e-9),
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _finalize(out_dir, written["tmps"], headers, meta, keep_old=old is not None and old.get("key") == key)
    return _result(out_dir, meta, False, seconds, n_tok / max(seconds, 1e-9))


def _unchanged(out_dir: Path, old: dict, docs, options: dict, inputs_key: str | None, chunking) -> bool:
    """Whether the complete files in ``out_dir`` already hold these documents: by the caller's ``inputs`` pin
    (nothing read), else by a hash-only pass when ``docs`` can be iterated again. Refreshes a stale pin."""
    if old.get("options") != options:
        return False
    if inputs_key is not None and old.get("inputs_key") == inputs_key:
        return True
    if not (callable(docs) or (iter(docs) is not docs and not isinstance(docs, Iterator))):
        return False  # a one-shot generator: encoded again (identical results keep the old files)
    h = hashlib.sha256()
    for chunk in _chunks(docs() if callable(docs) else docs, *chunking):
        h.update(_digests(chunk, options["seed"]))
    if json_hash({"options": options, "docs": h.hexdigest()}, n=None) != old["key"]:
        return False
    if inputs_key is not None and old.get("inputs_key") != inputs_key:
        old["inputs_key"] = inputs_key
        atomic_write_json(out_dir / META_NAME, old)
    return True


def _write_splits(stream: Iterable[str], tokenizer, out_dir: Path, *, dtype: np.dtype, val_fraction: float,
                  seed: int, num_workers: int, chunking: tuple[int, int], progress: bool) -> dict:
    """Encode ``stream`` into the temporary files of both splits (header placeholders, then the ids).

    Returns ``{"tmps", "counts", "docs_sha256", "backend"}``; on any error the temporary files are removed.
    """
    tmps = {s: _tmp_name(out_dir / f"{s}.bin") for s in SPLITS}
    files = {s: open(tmps[s], "wb") for s in SPLITS}
    bar = None
    try:
        for f in files.values():
            f.write(b"\0" * HEADER_SIZE)  # placeholder, rewritten with the real header at the end
        chunks = _chunks(stream, *chunking)
        first = next(chunks, None)
        if first is None:
            raise TokenFileError("empty corpus: no non-empty document to encode")
        encode, backend = _chunk_encoder(tokenizer, first[:32])
        if progress:
            bar = progress_bar(desc=f"encoding -> {out_dir.name}", unit="tok", unit_scale=True, smoothing=0.1)
        counts, docs_sha = _encode_into(files, itertools.chain([first], chunks), encode, tokenizer, dtype,
                                        val_fraction, seed, num_workers, bar)
        for f in files.values():
            f.close()
    except BaseException:
        for f in files.values():
            f.close()
        for p in tmps.values():
            p.unlink(missing_ok=True)
        raise
    finally:
        if bar is not None:
            bar.close()
    return {"tmps": tmps, "counts": counts, "docs_sha256": docs_sha, "backend": backend}


def _encode_into(files: dict, chunks: Iterable[list[str]], encode, tokenizer, dtype, val_fraction: float,
                 seed: int, num_workers: int, bar) -> tuple[dict, str]:
    """Encode chunks on ``num_workers`` threads, writing each chunk's ids in submission order (so the output is
    byte-identical for any number of workers), with at most ``2 * num_workers`` chunks in flight."""
    counts = {s: {"n_tokens": 0, "n_docs": 0} for s in SPLITS}
    docs_hash = hashlib.sha256()
    pending: deque = deque()

    def drain_one() -> None:
        fut, n_docs = pending.popleft()
        tr, va, n_val = fut.result()
        for s, arr, nd in (("train", tr, n_docs - n_val), ("val", va, n_val)):
            arr.tofile(files[s])
            counts[s]["n_tokens"] += int(arr.size)
            counts[s]["n_docs"] += int(nd)
        if bar is not None:
            bar.update(int(tr.size + va.size))

    with ThreadPoolExecutor(max_workers=num_workers, thread_name_prefix="azllm-encode") as pool:
        for chunk in chunks:
            dg = _digests(chunk, seed)
            docs_hash.update(dg)  # == updating with each document's digest in turn
            flags = _val_flags(dg, val_fraction).tolist()
            fut = pool.submit(_encode_chunk, encode, chunk, flags, tokenizer.eos_id, dtype, tokenizer.vocab_size)
            pending.append((fut, len(chunk)))
            while len(pending) >= 2 * num_workers:
                drain_one()
        while pending:
            drain_one()
    return counts, docs_hash.hexdigest()


def _split_header(split: str, written: dict, key: str, tokenizer, dtype, val_fraction, seed) -> dict:
    c = written["counts"][split]
    return {"format_version": FORMAT_VERSION, "split": split, "dtype": dtype.name, "n_tokens": c["n_tokens"],
            "n_docs": c["n_docs"], "vocab_size": int(tokenizer.vocab_size), "eos_id": int(tokenizer.eos_id),
            "tokenizer_fingerprint": tokenizer.fingerprint, "tokenizer_name": str(tokenizer.name), "key": key,
            "docs_sha256": written["docs_sha256"], "val_fraction": float(val_fraction), "seed": int(seed)}


def _finalize(out_dir: Path, tmps: dict, headers: dict, meta: dict, keep_old: bool) -> None:
    """Write the real headers, fsync, rename the files into place (val, then train), write the sidecar last.
    When the old files hold the same documents (``keep_old``) they stay untouched."""
    for s in SPLITS:
        with open(tmps[s], "r+b") as f:
            f.write(_header_bytes(headers[s]))
            f.flush()
            os.fsync(f.fileno())
    if keep_old:
        for p in tmps.values():
            p.unlink(missing_ok=True)
    else:
        (out_dir / META_NAME).unlink(missing_ok=True)
        os.replace(tmps["val"], out_dir / "val.bin")
        os.replace(tmps["train"], out_dir / "train.bin")
    atomic_write_json(out_dir / META_NAME, meta)


def encode_source(resolved, tokenizer, out_dir: str | os.PathLike, **kwargs) -> dict:
    """Encode a resolved data source (:func:`azllm.data.resolve_source`) with :func:`encode_corpus`.

    For local files the ``inputs`` pre-check is their sha256s plus the caps of the source, so a re-run with
    unchanged files and tokenizer skips without reading the corpus. Hub sources have no such pin (a dataset can
    change under the same name): their re-run re-streams the documents once, hashing only.

    >>> r = resolve_source({"path": "data/az/train/*.txt"}, data_root())  # doctest: +SKIP
    >>> encode_source(r, tok, artifacts_dir(P) / "tokens")["skipped"]  # doctest: +SKIP
    False
    """
    from .data import iter_documents

    inputs = kwargs.pop("inputs", None)
    if inputs is None and resolved.kind == "files":
        inputs = {"sha256": {Path(f).name: s for f, s in resolved.sha256s().items()}, "normalize": True,
                  "caps": [resolved.max_bytes, resolved.max_bytes_per_file, resolved.max_lines],
                  "text_field": resolved.text_field}
    return encode_corpus(lambda: iter_documents(resolved), tokenizer, out_dir, inputs=inputs, **kwargs)


# ---------------------------------------------------------------------------------------------------- reading

class TokenFile:
    """A token file mapped read-only: ``tokens`` is an ``np.memmap`` of the ids (no copy, no load).

    Checks on open: magic and version, file size == header + ``n_tokens * itemsize`` (a truncated or padded file
    is refused), and, when ``tokenizer`` or ``fingerprint`` is given, the tokenizer fingerprint.

    >>> tf = TokenFile("artifacts/tiny/tokens/train.bin", tok)  # doctest: +SKIP
    >>> x, y = tf.get_batch(8, 256, generator=torch.Generator().manual_seed(0))  # doctest: +SKIP
    >>> x.shape, x.dtype, bool((x[:, 1:] == y[:, :-1]).all())  # doctest: +SKIP
    (torch.Size([8, 256]), torch.int64, True)
    """

    def __init__(self, path: str | os.PathLike, tokenizer=None, *, fingerprint: str | None = None):
        self.path = Path(path)
        self.header = read_header(self.path)
        h = self.header
        try:
            self.dtype = np.dtype(h["dtype"]).newbyteorder("<")
            self.n_tokens = int(h["n_tokens"])
            self.vocab_size = int(h["vocab_size"])
            self.eos_id = int(h["eos_id"])
            self.fingerprint = str(h["tokenizer_fingerprint"])
        except (KeyError, TypeError) as e:
            raise TokenFileError(f"{self.path}: header lacks {e}; re-encode the corpus") from None
        self.n_docs = int(h.get("n_docs", 0))
        self.split = h.get("split")
        expected = HEADER_SIZE + self.n_tokens * self.dtype.itemsize
        size = self.path.stat().st_size
        if size != expected:
            raise TokenFileError(
                f"{self.path}: size {size} bytes, the header promises {expected} ({self.n_tokens} tokens of "
                f"{self.dtype.name}); the file is {'truncated' if size < expected else 'padded'} (an interrupted "
                "copy?). Re-encode it with azllm.tokens.encode_corpus.")
        want = fingerprint if fingerprint is not None else (tokenizer.fingerprint if tokenizer is not None else None)
        if want is not None and want != self.fingerprint:
            made = h.get("tokenizer_name")
            name = getattr(tokenizer, "name", None)
            raise TokenFileError(
                f"{self.path}: made with tokenizer {made!r} (fingerprint {self.fingerprint[:12]}…), not with "
                f"{name or 'the given one'} (fingerprint {want[:12]}…). Ids would mean other tokens: re-encode the "
                "corpus with this tokenizer or load the tokenizer that made the file.")
        if tokenizer is not None and tokenizer.vocab_size != self.vocab_size:
            raise TokenFileError(f"{self.path}: vocab_size {self.vocab_size} != tokenizer's {tokenizer.vocab_size}")
        self.tokens = (np.memmap(self.path, dtype=self.dtype, mode="r", offset=HEADER_SIZE, shape=(self.n_tokens,))
                       if self.n_tokens else np.zeros(0, dtype=self.dtype))

    def __len__(self) -> int:
        return self.n_tokens

    def __repr__(self) -> str:
        return (f"TokenFile({str(self.path)!r}, split={self.split}, n_tokens={self.n_tokens}, n_docs={self.n_docs}, "
                f"dtype={self.dtype.name}, vocab_size={self.vocab_size})")

    def _check_block(self, block_size: int) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if self.n_tokens < block_size + 1:
            raise TokenFileError(f"{self.path}: {self.n_tokens} tokens, fewer than block_size + 1 = "
                                 f"{block_size + 1}; use a smaller block_size or more data")

    def _to(self, buf: np.ndarray, device) -> "torch.Tensor":  # noqa: F821
        import torch

        t = torch.from_numpy(buf.astype(np.int64))
        device = torch.device(device)
        if device.type == "cuda":
            return t.pin_memory().to(device, non_blocking=True)
        return t if device.type == "cpu" else t.to(device)

    def get_batch(self, batch_size: int, block_size: int, generator=None, device="cpu"):
        """Random windows: ``x = tokens[i:i+block_size]``, ``y = tokens[i+1:i+block_size+1]`` for
        ``batch_size`` random starts ``i`` drawn with ``torch.randint(..., generator=generator)``.

        Returns int64 tensors of shape ``(batch_size, block_size)`` (Liger's kernels want int64). Deterministic
        for a seeded ``torch.Generator`` (an int is taken as a seed); on CUDA the batch is pinned and copied
        with ``non_blocking=True``. Windows may cross document boundaries (the EOS ids mark them), as in
        GPT-style pre-training.
        """
        import torch

        self._check_block(block_size)
        if isinstance(generator, int):
            generator = torch.Generator().manual_seed(generator)
        ix = torch.randint(self.n_tokens - block_size, (batch_size,), generator=generator).numpy()
        buf = self.tokens[ix[:, None] + np.arange(block_size + 1)]
        t = self._to(buf, device)
        return t[:, :-1], t[:, 1:]

    def iter_sequential(self, batch_size: int, block_size: int, device="cpu"):
        """Every next-token prediction of the split exactly once, in order, for evaluation.

        Window ``k`` is ``x = tokens[k*B:(k+1)*B]``, ``y`` = the same shifted by one (B = ``block_size``), batched
        by ``batch_size``; the last batch may be smaller, and a final window shorter than ``block_size`` (the
        tail) comes as its own batch of shape ``(1, tail)``. So the ``y`` of all batches, concatenated, equal
        ``tokens[1:]``.
        """
        if block_size < 1 or batch_size < 1:
            raise ValueError("batch_size and block_size must be >= 1")
        n_pred = self.n_tokens - 1
        full = max(n_pred, 0) // block_size
        for start in range(0, full, batch_size):
            k = np.arange(start, min(start + batch_size, full))
            buf = self.tokens[(k * block_size)[:, None] + np.arange(block_size + 1)]
            t = self._to(buf, device)
            yield t[:, :-1], t[:, 1:]
        tail = n_pred - full * block_size
        if tail > 0:
            buf = np.asarray(self.tokens[full * block_size:])[None, :]
            t = self._to(buf, device)
            yield t[:, :-1], t[:, 1:]


class _TokenWindows:
    """Fixed windows of a token file as a map-style dataset for the Hugging Face Trainer.

    Item ``i`` is ``{"input_ids": w, "labels": w}`` with ``w`` the ``i``-th window of ``block_size`` tokens
    (LongTensor), following the HF convention that the model shifts the labels itself. Windows start at
    ``offset + k * block_size`` with ``offset = seed % block_size``: ``seed=0`` is the plain grid, another seed
    (e.g. the epoch) moves every window boundary.

    Which sharding to use:

    - **HF Trainer / accelerate** (or any loop with a ``DistributedSampler``): leave ``rank`` and ``world_size``
      None. The Trainer's sampler already gives each rank different indices of a map-style dataset; sharding here
      as well would make every rank skip most of its data.
    - **A custom loop without a distributed sampler**: pass ``rank`` and ``world_size`` (or
      ``from_distributed=True`` to read them from an initialized ``torch.distributed``). Rank ``r`` then holds
      windows ``k = r, r + world_size, r + 2 * world_size, ...``, cut to the same length on every rank (so that
      collective ops never wait on a rank that ran out); ranks are disjoint and together cover all windows but at
      most ``world_size - 1``.

    >>> ds = TokenWindowDataset(TokenFile("artifacts/tiny/tokens/train.bin"), 256)  # doctest: +SKIP
    >>> ds[0]["input_ids"].shape  # doctest: +SKIP
    torch.Size([256])
    """

    def __init__(self, token_file: TokenFile | str | os.PathLike, block_size: int, *, rank: int | None = None,
                 world_size: int | None = None, seed: int = 0, from_distributed: bool = False):
        self.tf = token_file if isinstance(token_file, TokenFile) else TokenFile(token_file)
        self.block_size = int(block_size)
        if self.block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if from_distributed and rank is None and world_size is None:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                rank, world_size = dist.get_rank(), dist.get_world_size()
        if (rank is None) != (world_size is None):
            raise ValueError("pass both rank and world_size, or neither")
        self.rank, self.world_size = (0, 1) if rank is None else (int(rank), int(world_size))
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {rank} must be in [0, world_size={world_size})")
        self.offset = int(seed) % self.block_size
        self.n_windows_total = max(0, (self.tf.n_tokens - self.offset) // self.block_size)
        self.n_windows = self.n_windows_total // self.world_size
        if self.n_windows == 0:
            raise TokenFileError(f"{self.tf.path}: {self.tf.n_tokens} tokens give no window of {self.block_size} "
                                 f"tokens for rank {self.rank} of {self.world_size}; use a smaller block_size")

    def __len__(self) -> int:
        return self.n_windows

    def window_start(self, i: int) -> int:
        """Token position where item ``i`` of this rank starts."""
        if not -self.n_windows <= i < self.n_windows:
            raise IndexError(f"index {i} out of range for {self.n_windows} windows")
        i %= self.n_windows
        return self.offset + (i * self.world_size + self.rank) * self.block_size

    def __getitem__(self, i: int) -> dict:
        import torch

        s = self.window_start(int(i))
        ids = torch.from_numpy(self.tf.tokens[s:s + self.block_size].astype(np.int64))
        return {"input_ids": ids, "labels": ids.clone()}


def __getattr__(name: str):
    """``TokenWindowDataset`` subclasses ``torch.utils.data.Dataset``; it is built on first use so that
    ``import azllm.tokens`` (encoding, benchmarks in fresh processes) does not pay for importing torch."""
    if name == "TokenWindowDataset":
        import torch

        cls = type("TokenWindowDataset", (_TokenWindows, torch.utils.data.Dataset),
                   {"__doc__": _TokenWindows.__doc__, "__module__": __name__})
        globals()["TokenWindowDataset"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -------------------------------------------------------------------------------------------------- statistics

def corpus_stats(resolved, tokenizer) -> list[dict]:
    """Per input file (or hub id): documents, words (whitespace), characters, tokens (no EOS), tokens per word.

    >>> corpus_stats(resolve_source({"path": "data/az/train/*.txt"}, root), tok)[0]  # doctest: +SKIP
    {'source': 'edu_articles.txt', 'documents': 659, 'words': 21874, 'characters': 168003, 'tokens': 32112, ...}
    """
    from .data import iter_documents
    from .text import whitespace_words

    encode = None
    rows: dict[str, dict] = {}
    for f in resolved.files:  # every input file gets a row, also one that a cap leaves empty
        rows[Path(f).name] = {"source": Path(f).name, "documents": 0, "words": 0, "characters": 0, "tokens": 0}
    buf: list[tuple[str, str]] = []

    def flush() -> None:
        nonlocal encode
        if not buf:
            return
        texts = [d for _, d in buf]
        if encode is None:
            encode, _ = _chunk_encoder(tokenizer, texts[:32])
        for (origin, _), ids in zip(buf, encode(texts)):
            rows[origin]["tokens"] += len(ids)
        buf.clear()

    for origin, doc in iter_documents(resolved, with_origin=True):
        name = Path(origin).name if resolved.kind == "files" else origin
        r = rows.setdefault(name, {"source": name, "documents": 0, "words": 0, "characters": 0, "tokens": 0})
        r["documents"] += 1
        r["words"] += len(whitespace_words(doc))
        r["characters"] += len(doc)
        buf.append((name, doc))
        if len(buf) >= 2048:
            flush()
    flush()
    out = list(rows.values())
    total = {"source": "all", **{k: sum(r[k] for r in out) for k in ("documents", "words", "characters", "tokens")}}
    for r in out + [total]:
        r["tokens_per_word"] = r["tokens"] / max(r["words"], 1)
        r["chars_per_token"] = r["characters"] / max(r["tokens"], 1)
    return out + [total]
