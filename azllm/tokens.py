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
  (measured by :func:`benchmark`). Otherwise ``Tok.encode_batch`` is used.
  Measured on 2 cores (:func:`benchmark`, ``scripts/bench_tokens.py``): with the documents in memory the threads
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

__all__ = ["FORMAT_VERSION", "HEADER_SIZE", "TokenFileError", "token_dtype", "split_of", "encode_corpus",
           "encode_source", "TokenFile", "TokenWindowDataset", "main_tokenizer", "corpus_stats", "benchmark",
           "format_benchmark"]

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


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


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
    inputs_key = _sha({"options": options, "inputs": inputs}) if inputs is not None else None
    old = None if force else _existing(out_dir)
    if old is not None and old.get("options") == options:
        if inputs_key is not None and old.get("inputs_key") == inputs_key:
            return _result(out_dir, old, True, time.perf_counter() - t0, 0.0)
        if callable(docs) or (iter(docs) is not docs and not isinstance(docs, Iterator)):
            h = hashlib.sha256()
            for chunk in _chunks(docs() if callable(docs) else docs, int(chunk_docs), int(chunk_chars)):
                h.update(_digests(chunk, seed))
            if _sha({"options": options, "docs": h.hexdigest()}) == old["key"]:
                if inputs_key is not None and old.get("inputs_key") != inputs_key:
                    old["inputs_key"] = inputs_key
                    from .utils import atomic_write_json

                    atomic_write_json(out_dir / META_NAME, old)
                return _result(out_dir, old, True, time.perf_counter() - t0, 0.0)
    stream = docs() if callable(docs) else docs
    num_workers = max(1, int(num_workers or os.cpu_count() or 1))
    finals = {s: out_dir / f"{s}.bin" for s in SPLITS}
    tmps = {s: _tmp_name(p) for s, p in finals.items()}
    counts = {s: {"n_tokens": 0, "n_docs": 0} for s in SPLITS}
    docs_hash = hashlib.sha256()
    files = {s: open(tmps[s], "wb") for s in SPLITS}
    bar = None
    try:
        for f in files.values():
            f.write(b"\0" * HEADER_SIZE)  # placeholder, rewritten with the real header at the end
        chunks = _chunks(stream, int(chunk_docs), int(chunk_chars))
        first = next(chunks, None)
        if first is None:
            raise TokenFileError("empty corpus: no non-empty document to encode")
        encode, backend = _chunk_encoder(tokenizer, first[:32])
        if progress:
            from .utils import progress as tqdm

            bar = tqdm(desc=f"encoding -> {out_dir.name}", unit="tok", unit_scale=True, smoothing=0.1,
                       file=sys.stderr)
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
            for chunk in itertools.chain([first], chunks):
                dg = _digests(chunk, seed)
                docs_hash.update(dg)  # == updating with each document's digest in turn
                flags = _val_flags(dg, val_fraction).tolist()
                fut = pool.submit(_encode_chunk, encode, chunk, flags, tokenizer.eos_id, dtype, tokenizer.vocab_size)
                pending.append((fut, len(chunk)))
                while len(pending) >= 2 * num_workers:
                    drain_one()
            while pending:
                drain_one()
        docs_sha = docs_hash.hexdigest()
        key = _sha({"options": options, "docs": docs_sha})
        headers = {}
        for s in SPLITS:
            headers[s] = {"format_version": FORMAT_VERSION, "split": s, "dtype": dtype.name,
                          "n_tokens": counts[s]["n_tokens"], "n_docs": counts[s]["n_docs"],
                          "vocab_size": int(tokenizer.vocab_size), "eos_id": int(tokenizer.eos_id),
                          "tokenizer_fingerprint": tokenizer.fingerprint, "tokenizer_name": str(tokenizer.name),
                          "key": key, "docs_sha256": docs_sha, "val_fraction": float(val_fraction),
                          "seed": int(seed)}
            f = files[s]
            f.flush()
            f.seek(0)
            f.write(_header_bytes(headers[s]))
            f.flush()
            os.fsync(f.fileno())
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
    seconds = time.perf_counter() - t0
    n_tok = counts["train"]["n_tokens"] + counts["val"]["n_tokens"]
    meta = {"key": key, "inputs_key": inputs_key, "options": options, "docs_sha256": docs_sha, "dtype": dtype.name,
            "backend": backend, "num_workers": num_workers, "splits": headers, "inputs": inputs,
            "seconds": seconds, "tokens_per_s": n_tok / max(seconds, 1e-9),
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if old is not None and old.get("key") == key:  # same documents: keep the identical files untouched
        for p in tmps.values():
            p.unlink(missing_ok=True)
    else:
        (out_dir / META_NAME).unlink(missing_ok=True)
        os.replace(tmps["val"], finals["val"])
        os.replace(tmps["train"], finals["train"])
    from .utils import atomic_write_json

    atomic_write_json(out_dir / META_NAME, meta)
    return _result(out_dir, meta, False, seconds, n_tok / max(seconds, 1e-9))


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


# ------------------------------------------------------------------------------------------- run-level helpers

def main_tokenizer(params: dict):
    """The run's main tokenizer: ``params["tokens"]["tokenizer"]`` when set (any spec of
    :func:`azllm.tokenizer.load_tokenizer`, relative paths against the data root), otherwise the tokenizer that
    :func:`azllm.tokenizer.main_tokenizer` trains (or reuses) into ``artifacts_dir(params)/"tokenizer"``, the same
    folder notebook 01 writes.

    >>> tok = main_tokenizer(load_params("params/tiny.yaml"))  # doctest: +SKIP
    """
    from .config import data_root
    from .tokenizer import load_tokenizer
    from .tokenizer import main_tokenizer as train_main

    spec = params.get("tokens", {}).get("tokenizer")
    if spec:
        root = data_root(params)
        p = Path(os.path.expanduser(str(spec)))
        if not p.is_absolute() and root is not None and (root / p).exists():
            spec = str(root / p)
        return load_tokenizer(spec)
    return load_tokenizer(train_main(params), name=f"{params['run_name']}-main")


def tokens_dir(params: dict) -> Path:
    """Where the run's token files go: ``params["tokens"]["dir"]`` or ``artifacts_dir(params)/"tokens"``."""
    from .config import artifacts_dir

    d = params.get("tokens", {}).get("dir")
    return Path(d).expanduser().resolve() if d else artifacts_dir(params) / "tokens"


def encode_run(params: dict, tokenizer=None, progress: bool = True) -> dict:
    """Encode the run's training source (``params["data"]["train"]``) with the run's settings.

    >>> r = encode_run(P)  # doctest: +SKIP
    >>> TokenFile(r["train"], tok)  # doctest: +SKIP
    """
    from .config import data_root
    from .data import resolve_source

    t = params["tokens"]
    tok = tokenizer or main_tokenizer(params)
    resolved = resolve_source(params["data"]["train"], data_root(params))
    return encode_source(resolved, tok, tokens_dir(params), val_fraction=t["val_fraction"], seed=t["split_seed"],
                         num_workers=t["num_workers"], chunk_docs=t["chunk_docs"], progress=progress)


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


# ------------------------------------------------------------------------------------------------- benchmark

def _stream_docs(path: str, scale: int) -> Iterator[str]:
    """The documents of a one-document-per-line file, ``scale`` times over, read lazily."""
    for _ in range(scale):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if line:
                    yield line


def _bench_child(cfg: dict) -> dict:
    """One measurement in a fresh process (run by :func:`benchmark`): returns tokens, seconds, RSS figures."""
    import resource

    from .tokenizer import load_tokenizer

    from .utils import peak_rss_mb as rss  # VmHWM: a fresh child's own peak, not its parent's

    variant, scale, out = cfg["variant"], int(cfg["scale"]), Path(cfg["out"])
    tok = load_tokenizer(cfg["encoder_tokenizer"] if variant == "c" else cfg["tokenizer"])
    eos, dtype = tok.eos_id, token_dtype(tok.vocab_size)
    docs = _stream_docs(cfg["corpus"], scale)
    res: dict = {}
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = ru0.ru_utime + ru0.ru_stime
    if variant in ("limit", "limit_1thread", "hf_batch"):
        if variant == "hf_batch":
            tok = load_tokenizer(cfg["encoder_tokenizer"])
        texts = list(itertools.islice(docs, cfg.get("max_docs") or None))
        fn = tok.encode_batch
        if variant == "limit_1thread":
            fn = lambda ts: [tok.encode(t) for t in ts]  # noqa: E731
        base = rss()
        times = []
        for _ in range(int(cfg.get("inner", 2))):
            t0 = time.perf_counter()
            ids = fn(texts)
            times.append(time.perf_counter() - t0)
        n = sum(map(len, ids)) + len(ids)  # + EOS, to count like the files
        res = {"tokens": n, "seconds": float(np.median(times))}
    else:
        base = rss()
        t0 = time.perf_counter()
        if variant == "a":  # naive: one growing Python list, saved at the end
            ids: list[int] = []
            for d in docs:
                ids.extend(tok.encode(d))
                ids.append(eos)
            np.array(ids, dtype=dtype).tofile(out)
            n = len(ids)
        elif variant == "b":  # per-document encode, appended to the file at once
            n = 0
            with open(out, "wb") as f:
                for d in docs:
                    a = np.array(tok.encode(d) + [eos], dtype=dtype)
                    a.tofile(f)
                    n += a.size
        elif variant == "c":
            r = encode_corpus(docs, tok, out, val_fraction=0.01, progress=False, force=True)
            n = r["train_tokens"] + r["val_tokens"]
            res["backend"] = r["backend"]
        else:
            raise ValueError(f"unknown benchmark variant {variant!r}")
        res.update(tokens=n, seconds=time.perf_counter() - t0)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    res.update(peak_rss_mb=rss(), base_rss_mb=base, cpu_seconds_process=ru.ru_utime + ru.ru_stime)
    res["rss_growth_mb"] = res["peak_rss_mb"] - base
    res["tokens_per_s"] = res["tokens"] / max(res["seconds"], 1e-9)
    # CPU seconds of the measured work (the limits: all inner repeats): robust when other jobs share the cores
    res["cpu_seconds"] = res.pop("cpu_seconds_process") - cpu0
    inner = int(cfg.get("inner", 2)) if variant in ("limit", "limit_1thread", "hf_batch") else 1
    res["tokens_per_cpu_s"] = res["tokens"] * inner / max(res["cpu_seconds"], 1e-9)
    return res


def _run_child(cfg: dict, timeout: float = 3600) -> dict:
    import subprocess

    code = ("import json,sys; from azllm.tokens import _bench_child; "
            "print('AZLLM_RESULT' + json.dumps(_bench_child(json.loads(sys.argv[1]))))")
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    p = subprocess.run([sys.executable, "-c", code, json.dumps(cfg)], capture_output=True, text=True, env=env,
                       timeout=timeout)
    for line in p.stdout.splitlines():
        if line.startswith("AZLLM_RESULT"):
            return json.loads(line[len("AZLLM_RESULT"):])
    raise RuntimeError(f"benchmark child {cfg['variant']} failed (rc={p.returncode}):\n{p.stderr[-3000:]}")


def _bench_get_batch(train_bin: Path, vocab_size: int, batch_size: int, block_size: int, steps: int) -> dict:
    """get_batch batches/s vs one training step (fwd + bwd + AdamW) of a tiny Llama on the same batches."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tf = TokenFile(train_bin)
    g = torch.Generator().manual_seed(0)
    for _ in range(10):
        tf.get_batch(batch_size, block_size, g)
    n = max(200, steps * 20)
    t0 = time.perf_counter()
    for _ in range(n):
        tf.get_batch(batch_size, block_size, g)
    gb = (time.perf_counter() - t0) / n
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=128, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=block_size)
    model = LlamaForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    for i in range(steps + 2):
        x, _ = tf.get_batch(batch_size, block_size, g)
        t0 = time.perf_counter()
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= 2:  # warm-up
            times.append(time.perf_counter() - t0)
    step = float(np.median(times))
    return {"get_batch_ms": gb * 1e3, "batches_per_s": 1 / gb, "batch_tokens_per_s": batch_size * block_size / gb,
            "train_step_ms": step * 1e3, "get_batch_share_of_step": gb / step,
            "model": f"LlamaForCausalLM hidden 128, 2 layers, 4 heads, vocab {vocab_size}, "
                     f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params",
            "batch_size": batch_size, "block_size": block_size, "torch_threads": torch.get_num_threads()}


def benchmark(resolved, tokenizer_path: str | os.PathLike, workdir: str | os.PathLike, *, scale: int = 10,
              repeats: int = 3, batch_size: int = 8, block_size: int = 256, train_steps: int = 5,
              hf_batch: bool = True, out_json: str | os.PathLike | None = None, progress: bool = True) -> dict:
    """Measure the encoders side by side, in fresh processes, in ``repeats`` interleaved rounds (medians).

    Variants, each at 1x and ``scale``x the corpus (the corpus file read ``scale`` times over, never held in
    memory): (a) naive list, (b) per-document encode + ``tofile``, (c) :func:`encode_corpus`. Also the physical
    limit, the tokenizer's own batch encode on all cores with the documents in memory and nothing written
    (``limit``), the same one document at a time on one thread (``limit_1thread``), and, when the tokenizer is a
    folder with ``sp.model``, the folder's HF ``tokenizers`` backend (``hf_batch``, on 1x). Peak RSS is
    the high-water mark of each child (``VmHWM``, see ``_bench_child``); ``rss_growth_mb`` subtracts the high-water mark
    after imports.

    Decisions: the corpus is normalized once, up front, into ``workdir/corpus.txt`` (one document per line):
    :func:`encode_corpus` takes normalized documents, and normalizing is the same cost for every variant.
    (a), (b) and the limits use the SentencePiece model of the folder (same ids as the folder's
    ``tokenizer.json``, which (c) gets and maps to the same engine), so all variants use one engine.
    ``get_batch`` is timed against one training step (fwd + bwd + AdamW) of a tiny Llama (hidden 128, 2 layers,
    4 heads); the training issue's preset may differ in size.

    >>> res = benchmark(resolved, "artifacts/default/tokenizer", "artifacts/default/bench")  # doctest: +SKIP
    >>> print(format_benchmark(res))  # doctest: +SKIP
    """
    from .data import iter_documents
    from .utils import atomic_write_json, machine_info

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    corpus = workdir / "corpus.txt"
    tmp = corpus.with_suffix(".txt.tmp")
    n_docs = n_chars = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for d in iter_documents(resolved):
            f.write(d.replace("\n", " ") + "\n")
            n_docs += 1
            n_chars += len(d)
    os.replace(tmp, corpus)
    tpath = Path(tokenizer_path)
    sp_spec = str(tpath / "sp.model") if (tpath / "sp.model").is_file() else str(tpath)
    base = {"tokenizer": sp_spec, "encoder_tokenizer": str(tpath), "corpus": str(corpus)}
    jobs = [("limit", 1), ("limit_1thread", 1)] + [(v, s) for s in (1, scale) for v in ("a", "b", "c")]
    if hf_batch and sp_spec != str(tpath):
        jobs.append(("hf_batch", 1))
    runs: dict[str, list[dict]] = {}
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    bar = None
    if progress:
        from .utils import progress as tqdm

        bar = tqdm(total=len(jobs) * repeats, desc="benchmark", unit="run", file=sys.stderr)
    for _ in range(repeats):
        for v, s in jobs:
            cfg = {**base, "variant": v, "scale": s, "out": str(workdir / f"out_{v}_{s}")}
            if v == "hf_batch":
                cfg.update(max_docs=max(1, n_docs // 4), inner=1)  # HF Unigram is slow: a quarter of the corpus
            if v == "c":
                cfg["out"] = str(workdir / f"tokens_{s}")
            runs.setdefault(f"{v}@{s}", []).append(_run_child(cfg))
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    med = {}
    for k, rs in runs.items():
        med[k] = {m: float(np.median([r[m] for r in rs])) for m in
                  ("tokens_per_s", "seconds", "peak_rss_mb", "base_rss_mb", "rss_growth_mb", "tokens",
                   "cpu_seconds", "tokens_per_cpu_s")}
        med[k]["runs"] = len(rs)
        if "backend" in rs[0]:
            med[k]["backend"] = rs[0]["backend"]
    lim = med["limit@1"]["tokens_per_s"]
    ratios = {
        "c_over_limit_1x": med["c@1"]["tokens_per_s"] / lim,
        f"c_over_limit_{scale}x": med[f"c@{scale}"]["tokens_per_s"] / lim,
        "c_over_a_1x": med["c@1"]["tokens_per_s"] / med["a@1"]["tokens_per_s"],
        f"c_over_a_{scale}x": med[f"c@{scale}"]["tokens_per_s"] / med[f"a@{scale}"]["tokens_per_s"],
        "b_over_a_1x": med["b@1"]["tokens_per_s"] / med["a@1"]["tokens_per_s"],
        "limit_over_a_1x": lim / med["a@1"]["tokens_per_s"],
        "limit_over_1thread": lim / med["limit_1thread@1"]["tokens_per_s"],
        "a_rss_growth_1x_to_Nx_mb": med[f"a@{scale}"]["peak_rss_mb"] - med["a@1"]["peak_rss_mb"],
        "b_rss_growth_1x_to_Nx_mb": med[f"b@{scale}"]["peak_rss_mb"] - med["b@1"]["peak_rss_mb"],
        "c_rss_growth_1x_to_Nx_mb": med[f"c@{scale}"]["peak_rss_mb"] - med["c@1"]["peak_rss_mb"],
    }
    if "hf_batch@1" in med:
        ratios["sentencepiece_over_hf_batch"] = lim / med["hf_batch@1"]["tokens_per_s"]
    tf = TokenFile(workdir / "tokens_1" / "train.bin")
    gb = _bench_get_batch(tf.path, tf.vocab_size, batch_size, block_size, train_steps)
    res = {"variants": med, "ratios": ratios, "get_batch": gb, "scale": scale, "repeats": repeats,
           "corpus": {"documents": n_docs, "characters": n_chars, "tokens": int(med["c@1"]["tokens"]),
                      "source": resolved.describe()},
           "targets": {"c_over_limit>=0.85": ratios["c_over_limit_1x"] >= 0.85,
                       "c_rss_growth<64MB": ratios["c_rss_growth_1x_to_Nx_mb"] < 64,
                       "get_batch<1%_of_step": gb["get_batch_share_of_step"] < 0.01},
           "machine": machine_info(), "tokenizer": str(tpath),
           # 1-minute load average before and after the runs: above the core count, other jobs shared the CPUs
           "load_avg_1min": [load_before[0] if load_before else None,
                             os.getloadavg()[0] if hasattr(os, "getloadavg") else None]}
    if out_json:
        atomic_write_json(out_json, res)
    return res


_LABELS = {"a": "(a) naive list", "b": "(b) per-doc encode + tofile", "c": "(c) azllm encode_corpus",
           "limit": "limit: batch encode, all cores, no writing", "limit_1thread": "1 thread, encode only",
           "hf_batch": "HF tokenizers backend, batch, all cores"}


def benchmark_table(res: dict) -> list[dict]:
    """The benchmark's medians as rows (for a DataFrame)."""
    rows = []
    lim = res["variants"]["limit@1"]["tokens_per_s"]
    a = {s: res["variants"].get(f"a@{s}", {}).get("tokens_per_s") for s in (1, res["scale"])}
    for k, m in res["variants"].items():
        v, s = k.split("@")
        rows.append({"variant": _LABELS.get(v, v), "scale": f"{s}x", "Mtokens/s": m["tokens_per_s"] / 1e6,
                     "vs limit": m["tokens_per_s"] / lim,
                     "vs (a)": m["tokens_per_s"] / a[int(s)] if a.get(int(s)) else None,
                     "seconds": m["seconds"], "peak RSS MB": m["peak_rss_mb"],
                     "RSS growth MB": m["rss_growth_mb"], "tokens": int(m["tokens"]),
                     "Mtokens/CPU-s": m["tokens_per_cpu_s"] / 1e6})
    return rows


def format_benchmark(res: dict) -> str:
    """A plain-text table of :func:`benchmark`'s medians and ratios."""
    lines = [f"{'variant':44s} {'scale':>5s} {'Mtok/s':>7s} {'vs lim':>6s} {'vs (a)':>6s} {'sec':>7s} "
             f"{'peakRSS':>8s} {'growth':>7s} {'Mtok/CPU-s':>10s}"]
    for r in benchmark_table(res):
        va = f"{r['vs (a)']:.2f}" if r["vs (a)"] is not None else "-"
        lines.append(f"{r['variant']:44s} {r['scale']:>5s} {r['Mtokens/s']:7.2f} {r['vs limit']:6.2f} {va:>6s} "
                     f"{r['seconds']:7.2f} {r['peak RSS MB']:8.0f} {r['RSS growth MB']:7.0f} "
                     f"{r['Mtokens/CPU-s']:10.2f}")
    lines.append("")
    lines += [f"{k:34s} {v:.3f}" for k, v in res["ratios"].items()]
    g = res["get_batch"]
    lines.append(f"get_batch({g['batch_size']}, {g['block_size']}): {g['get_batch_ms']:.3f} ms "
                 f"({g['batches_per_s']:.0f} batches/s, {g['batch_tokens_per_s'] / 1e6:.1f} Mtok/s); "
                 f"train step {g['train_step_ms']:.1f} ms ({g['model']}); share {g['get_batch_share_of_step']:.2%}")
    la = res.get("load_avg_1min") or [None, None]
    if la[0] is not None:
        lines.append(f"load average (1 min) before/after: {la[0]:.1f} / {la[1]:.1f} on "
                     f"{res['machine'].get('cpu_count')} cores")
    lines.append("targets: " + ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in res["targets"].items()))
    return "\n".join(lines)


def plot_benchmark(res: dict):
    """Bar charts of throughput and peak RSS of (a), (b), (c) at 1x and Nx; returns the matplotlib figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    scales = [1, res["scale"]]
    width = 0.38
    for j, (metric, label) in enumerate([("tokens_per_s", "tokens/s (millions)"), ("peak_rss_mb", "peak RSS (MB)")]):
        ax = axes[j]
        for i, s in enumerate(scales):
            vals = [res["variants"][f"{v}@{s}"][metric] / (1e6 if j == 0 else 1) for v in "abc"]
            ax.bar(np.arange(3) + (i - 0.5) * width, vals, width, label=f"{s}x corpus")
        if j == 0:
            ax.axhline(res["variants"]["limit@1"]["tokens_per_s"] / 1e6, color="k", ls="--", lw=1,
                       label="limit (batch encode, all cores)")
        ax.set_xticks(range(3), ["(a) naive list", "(b) per-doc tofile", "(c) encode_corpus"])
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    fig.suptitle("Encoding the corpus: throughput and memory (medians of fresh processes)")
    fig.tight_layout()
    return fig


def run_benchmark(params: dict, tokenizer=None, out_json: str | os.PathLike | None = None,
                  progress: bool = True) -> dict:
    """:func:`benchmark` with the run's settings (``params["tokens"]["benchmark"]``) on ``params["data"]["train"]``.

    ``quick``: one round, each corpus file capped at 50 KB unless ``max_bytes_per_file`` says otherwise, 3 training
    steps; for tests and the tiny report. Work files go to ``artifacts_dir(params)/"tokens_bench"``.

    >>> res = run_benchmark(load_params("params/default.yaml"))  # doctest: +SKIP
    """
    from .config import artifacts_dir, data_root
    from .data import resolve_source

    b = params["tokens"]["benchmark"]
    tok = tokenizer or main_tokenizer(params)
    spec = tok.path or params["tokens"].get("tokenizer")
    if not spec:
        raise TokenFileError(f"tokenizer {tok.name!r} has no path that a benchmark process could load; set "
                             "tokens.tokenizer to a folder, a file or a tiktoken name")
    src = dict(params["data"]["train"])
    cap = b["max_bytes_per_file"] if b["max_bytes_per_file"] is not None else (50_000 if b["quick"] else None)
    if cap is not None:
        src["max_bytes_per_file"] = cap
    resolved = resolve_source(src, data_root(params))
    return benchmark(resolved, spec, artifacts_dir(params) / "tokens_bench", scale=int(b["scale"]),
                     repeats=1 if b["quick"] else int(b["repeats"]), batch_size=int(b["batch_size"]),
                     block_size=int(b["block_size"]), train_steps=3 if b["quick"] else 10, out_json=out_json,
                     progress=progress)
