"""Encoding a corpus into token files: chunks, threads, skip checks, atomic files. See :mod:`azllm.tokens`."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..utils import atomic_write_json, json_hash
from ..utils import progress as progress_bar
from .format import (
    FORMAT_VERSION,
    HEADER_SIZE,
    META_NAME,
    SPLITS,
    TokenFileError,
    doc_digests,
    header_bytes,
    read_header,
    token_dtype,
    val_flags,
)

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
    """Encode one chunk; return ``(train_ids, val_ids, train_lengths, val_lengths)``: flat arrays with EOS after
    each document, and each document's length in tokens (EOS included)."""
    ids = encode(texts)
    out, lengths = [], []
    for want_val in (False, True):
        sel = [d for d, v in zip(ids, flags) if v is want_val]
        lengths.append(np.fromiter((len(d) + 1 for d in sel), dtype=np.uint64, count=len(sel)))
        n = sum(map(len, sel)) + len(sel)
        try:
            arr = np.fromiter(itertools.chain.from_iterable(x for d in sel for x in (d, (eos,))), dtype=dtype, count=n)
        except OverflowError as e:  # an id outside [0, max of dtype]
            raise TokenFileError(f"tokenizer produced an id outside its vocabulary ({e})") from None
        if n and arr.max() >= vocab_size:
            raise TokenFileError(
                f"tokenizer produced id {int(arr.max())} outside its vocabulary (vocab_size={vocab_size})"
            )
        out.append(arr)
    return out[0], out[1], lengths[0], lengths[1]


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
    for p in itertools.chain(out_dir.glob(".*.tmp"), out_dir.glob(".parts/*/.*.tmp")):
        m = re.match(r"^\.(.+)\.(\d+)\.tmp$", p.name)
        if not m or not m.group(1).endswith((".bin", ".idx", ".json")):
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
            if (out_dir / f"{s}.idx").stat().st_size != 8 * int(h["n_docs"]):
                return None
            from .read import TokenFile

            TokenFile(out_dir / f"{s}.bin")  # size check
        return meta
    except (OSError, ValueError, KeyError):
        return None


def _result(out_dir: Path, meta: dict, skipped: bool, seconds: float, tokens_per_s: float) -> dict:
    return {
        "train": out_dir / "train.bin",
        "val": out_dir / "val.bin",
        "train_index": out_dir / "train.idx",
        "val_index": out_dir / "val.idx",
        "train_tokens": meta["splits"]["train"]["n_tokens"],
        "val_tokens": meta["splits"]["val"]["n_tokens"],
        "train_docs": meta["splits"]["train"]["n_docs"],
        "val_docs": meta["splits"]["val"]["n_docs"],
        "skipped": skipped,
        "seconds": seconds,
        "tokens_per_s": tokens_per_s,
        "key": meta["key"],
        "docs_sha256": meta["docs_sha256"],
        "dtype": meta["dtype"],
        "backend": meta.get("backend"),
        "resumed_parts": 0 if skipped else meta.get("resumed_parts", 0),
        "meta": out_dir / META_NAME,
    }


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
    part_chars: int = 64 << 20,
    inputs: Any = None,
    force: bool = False,
    progress: bool = True,
) -> dict:
    """Encode documents into ``out_dir/train.bin`` and ``out_dir/val.bin`` (see the module docstring).

    ``docs``: already-normalized documents (an iterable, or a zero-argument callable returning one);
    ``tokenizer``: an :class:`azllm.tokenizer.Tok`; ``inputs``: optional JSON-able description that pins the
    documents (file sha256s + source options), which lets a re-run skip without reading them;
    ``num_workers``: encoding threads (default: all cores); ``part_chars``: the unit of resumption (a killed run
    loses at most the part it was encoding).

    Steps: skip check (:func:`_unchanged`) -> write (:func:`_write_splits`) -> finalize (:func:`_finalize`).

    Returns ``{"train": Path, "val": Path, "train_index": Path, "val_index": Path, "train_tokens", "val_tokens",
    "train_docs", "val_docs", "skipped", "seconds", "tokens_per_s", "key", "docs_sha256", "dtype", "backend",
    "resumed_parts", "meta"}``.

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
    options = {
        "format_version": FORMAT_VERSION,
        "tokenizer": tokenizer.fingerprint,
        "val_fraction": float(val_fraction),
        "seed": int(seed),
        "dtype": dtype.name,
    }
    inputs_key = json_hash({"options": options, "inputs": inputs}, n=None) if inputs is not None else None
    chunking = (int(chunk_docs), int(chunk_chars))
    old = None if force else _existing(out_dir)
    if old is not None and _unchanged(out_dir, old, docs, options, inputs_key, chunking):
        return _result(out_dir, old, True, time.perf_counter() - t0, 0.0)
    num_workers = max(1, int(num_workers or os.cpu_count() or 1))
    run_id = json_hash({"options": options, "inputs": inputs_key, "chunking": chunking, "part_chars": part_chars})
    written = _write_splits(
        docs() if callable(docs) else docs,
        tokenizer,
        out_dir,
        dtype=dtype,
        val_fraction=float(val_fraction),
        seed=int(seed),
        num_workers=num_workers,
        chunking=chunking,
        part_chars=int(part_chars),
        run_id=run_id,
        progress=progress,
    )
    key = json_hash({"options": options, "docs": written["docs_sha256"]}, n=None)
    headers = {s: _split_header(s, written, key, tokenizer, dtype, val_fraction, seed) for s in SPLITS}
    seconds = time.perf_counter() - t0
    n_tok = sum(h["n_tokens"] for h in headers.values())
    meta = {
        "key": key,
        "inputs_key": inputs_key,
        "options": options,
        "docs_sha256": written["docs_sha256"],
        "dtype": dtype.name,
        "backend": written["backend"],
        "num_workers": num_workers,
        "parts": written["parts"],
        "resumed_parts": written["resumed_parts"],
        "splits": headers,
        "inputs": inputs,
        "seconds": seconds,
        "tokens_per_s": n_tok / max(seconds, 1e-9),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _finalize(out_dir, written["tmps"], headers, meta, keep_old=old is not None and old.get("key") == key)
    shutil.rmtree(out_dir / ".parts", ignore_errors=True)
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
        h.update(doc_digests(chunk, options["seed"]))
    if json_hash({"options": options, "docs": h.hexdigest()}, n=None) != old["key"]:
        return False
    if inputs_key is not None and old.get("inputs_key") != inputs_key:
        old["inputs_key"] = inputs_key
        atomic_write_json(out_dir / META_NAME, old)
    return True


def _take_part(chunks: Iterator[list[str]], part_chars: int) -> Iterator[list[str]]:
    """The next chunks of ``chunks`` up to and including the one that brings the part to ``part_chars``."""
    chars = 0
    for chunk in chunks:
        yield chunk
        chars += sum(map(len, chunk))
        if chars >= part_chars:
            return


def _part_files(parts: Path, i: int) -> dict[str, Path]:
    """The four files of part ``i``: ids and document index of each split."""
    return {f"{s}.{ext}": parts / f"part-{i:05d}.{s}.{ext}" for s in SPLITS for ext in ("bin", "idx")}


def _done_parts(parts: Path) -> list[dict]:
    """The complete parts of an earlier, interrupted run, in order (a part is complete when its json exists)."""
    done = []
    while True:
        try:
            done.append(json.loads((parts / f"part-{len(done):05d}.json").read_text()))
        except (OSError, ValueError):
            return done


def _write_splits(
    stream: Iterable[str],
    tokenizer,
    out_dir: Path,
    *,
    dtype: np.dtype,
    val_fraction: float,
    seed: int,
    num_workers: int,
    chunking: tuple[int, int],
    part_chars: int,
    run_id: str,
    progress: bool,
) -> dict:
    """Encode ``stream`` part by part into ``out_dir/.parts/<run_id>/``, then join the parts into the temporary
    files of both splits (ids after a header placeholder, and the document index).

    A part is about ``part_chars`` characters of documents; it is complete when its json is written (last). A run
    that finds complete parts of the same ``run_id`` (same tokenizer, options and inputs) reads their documents
    again only to hash them: when the hashes match, the part is kept, else it and every later one are encoded again.
    Returns ``{"tmps", "counts", "docs_sha256", "backend", "resumed_parts", "parts"}``."""
    parts = out_dir / ".parts" / run_id
    for other in (out_dir / ".parts").glob("*"):
        if other.name != run_id:
            shutil.rmtree(other, ignore_errors=True)
    parts.mkdir(parents=True, exist_ok=True)
    done = _done_parts(parts)
    chunks = _chunks(stream, *chunking)
    first = next(chunks, None)
    if first is None:
        raise TokenFileError("empty corpus: no non-empty document to encode")
    encode, backend = _chunk_encoder(tokenizer, first[:32])
    chunks = itertools.chain([first], chunks)
    docs_hash = hashlib.sha256()
    metas: list[dict] = []
    resumed = 0
    bar = (
        progress_bar(desc=f"encoding -> {out_dir.name}", unit="tok", unit_scale=True, smoothing=0.1)
        if progress
        else None
    )
    try:
        while True:
            i = len(metas)
            if i < len(done):
                held = list(_take_part(chunks, part_chars))
                digests = [doc_digests(c, seed) for c in held]
                if held and hashlib.sha256(b"".join(digests)).hexdigest() == done[i]["digests_sha256"]:
                    for d in digests:
                        docs_hash.update(d)
                    metas.append(done[i])
                    resumed += 1
                    if bar is not None:
                        bar.update(done[i]["train"]["n_tokens"] + done[i]["val"]["n_tokens"])
                    continue
                for j in range(i, len(done)):  # the input changed from here: encode again
                    (parts / f"part-{j:05d}.json").unlink(missing_ok=True)
                done = done[:i]
                source: Iterator[list[str]] = iter(held)
            else:
                source = _take_part(chunks, part_chars)
            meta = _encode_part(
                parts, i, source, encode, tokenizer, dtype, val_fraction, seed, num_workers, docs_hash, bar
            )
            if meta is None:
                break
            metas.append(meta)
    finally:
        if bar is not None:
            bar.close()
    tmps = _join_parts(parts, metas, out_dir)
    counts = {s: {k: sum(m[s][k] for m in metas) for k in ("n_tokens", "n_docs")} for s in SPLITS}
    return {
        "tmps": tmps,
        "counts": counts,
        "docs_sha256": docs_hash.hexdigest(),
        "backend": backend,
        "resumed_parts": resumed,
        "parts": len(metas),
        "parts_dir": parts,
    }


def _encode_part(
    parts: Path, i: int, chunks, encode, tokenizer, dtype, val_fraction, seed, num_workers, docs_hash, bar
) -> dict | None:
    """Encode one part's chunks into its files; write its json last. None when there was nothing left."""
    chunks = iter(chunks)
    first = next(chunks, None)
    if first is None:
        return None
    names = _part_files(parts, i)
    tmps = {k: _tmp_name(v) for k, v in names.items()}
    files = {k: open(v, "wb") for k, v in tmps.items()}
    part_hash = hashlib.sha256()
    try:
        counts = _encode_into(
            files,
            itertools.chain([first], chunks),
            encode,
            tokenizer,
            dtype,
            val_fraction,
            seed,
            num_workers,
            bar,
            (docs_hash, part_hash),
        )
        for f in files.values():
            f.close()
        for k in names:
            os.replace(tmps[k], names[k])
    except BaseException:
        for f in files.values():
            f.close()
        for v in tmps.values():
            v.unlink(missing_ok=True)
        raise
    meta = {**counts, "digests_sha256": part_hash.hexdigest()}
    atomic_write_json(parts / f"part-{i:05d}.json", meta)
    return meta


def _join_parts(parts: Path, metas: list[dict], out_dir: Path) -> dict[str, Path]:
    """The parts' ids and document indexes joined, in order, into temporary files beside the final ones."""
    tmps = {f"{s}.{ext}": _tmp_name(out_dir / f"{s}.{ext}") for s in SPLITS for ext in ("bin", "idx")}
    try:
        for s in SPLITS:
            with open(tmps[f"{s}.bin"], "wb") as ids, open(tmps[f"{s}.idx"], "wb") as idx:
                ids.write(b"\0" * HEADER_SIZE)  # placeholder, rewritten with the real header at the end
                base = np.uint64(0)
                for i, meta in enumerate(metas):
                    files = _part_files(parts, i)
                    with open(files[f"{s}.bin"], "rb") as f:
                        shutil.copyfileobj(f, ids, 16 << 20)
                    (np.fromfile(files[f"{s}.idx"], dtype="<u8") + base).tofile(idx)
                    base += np.uint64(meta[s]["n_tokens"])
    except BaseException:
        for v in tmps.values():
            v.unlink(missing_ok=True)
        raise
    return tmps


def _encode_into(
    files: dict,
    chunks: Iterable[list[str]],
    encode,
    tokenizer,
    dtype,
    val_fraction: float,
    seed: int,
    num_workers: int,
    bar,
    hashes: tuple,
) -> dict:
    """Encode chunks on ``num_workers`` threads, writing each chunk's ids and document ends in submission order (so
    the output is byte-identical for any number of workers), with at most ``2 * num_workers`` chunks in flight.
    Every document's digest updates each of ``hashes`` in order. Returns the counts of each split."""
    counts = {s: {"n_tokens": 0, "n_docs": 0} for s in SPLITS}
    pending: deque = deque()

    def drain_one() -> None:
        tr, va, tr_len, va_len = pending.popleft().result()
        for s, arr, lengths in (("train", tr, tr_len), ("val", va, va_len)):
            arr.tofile(files[f"{s}.bin"])
            (np.cumsum(lengths, dtype=np.uint64) + np.uint64(counts[s]["n_tokens"])).astype("<u8").tofile(
                files[f"{s}.idx"]
            )
            counts[s]["n_tokens"] += int(arr.size)
            counts[s]["n_docs"] += int(lengths.size)
        if bar is not None:
            bar.update(int(tr.size + va.size))

    with ThreadPoolExecutor(max_workers=num_workers, thread_name_prefix="azllm-encode") as pool:
        for chunk in chunks:
            dg = doc_digests(chunk, seed)
            for h in hashes:
                h.update(dg)  # == updating with each document's digest in turn
            flags = val_flags(dg, val_fraction).tolist()
            pending.append(
                pool.submit(_encode_chunk, encode, chunk, flags, tokenizer.eos_id, dtype, tokenizer.vocab_size)
            )
            while len(pending) >= 2 * num_workers:
                drain_one()
        while pending:
            drain_one()
    return counts


def _split_header(split: str, written: dict, key: str, tokenizer, dtype, val_fraction, seed) -> dict:
    c = written["counts"][split]
    return {
        "format_version": FORMAT_VERSION,
        "split": split,
        "dtype": dtype.name,
        "n_tokens": c["n_tokens"],
        "n_docs": c["n_docs"],
        "vocab_size": int(tokenizer.vocab_size),
        "eos_id": int(tokenizer.eos_id),
        "tokenizer_fingerprint": tokenizer.fingerprint,
        "tokenizer_name": str(tokenizer.name),
        "key": key,
        "docs_sha256": written["docs_sha256"],
        "val_fraction": float(val_fraction),
        "seed": int(seed),
    }


def _finalize(out_dir: Path, tmps: dict, headers: dict, meta: dict, keep_old: bool) -> None:
    """Write the real headers, fsync, rename the files into place (indexes, then val, then train), write the
    sidecar last. When the old files hold the same documents (``keep_old``) they stay untouched."""
    for s in SPLITS:
        with open(tmps[f"{s}.bin"], "r+b") as f:
            f.write(header_bytes(headers[s]))
            f.flush()
            os.fsync(f.fileno())
    if keep_old:
        for p in tmps.values():
            p.unlink(missing_ok=True)
    else:
        (out_dir / META_NAME).unlink(missing_ok=True)
        for name in ("train.idx", "val.idx", "val.bin", "train.bin"):
            os.replace(tmps[name], out_dir / name)
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
    from ..data import iter_documents

    inputs = kwargs.pop("inputs", None)
    if inputs is None and resolved.kind == "files":
        inputs = {
            "sha256": {Path(f).name: s for f, s in resolved.sha256s().items()},
            "normalize": True,
            "caps": [resolved.max_bytes, resolved.max_bytes_per_file, resolved.max_lines]
            + ([resolved.skip_lines] if resolved.skip_lines else []),  # the files encoded before it keep their key
            "text_field": resolved.text_field,
        }
    return encode_corpus(lambda: iter_documents(resolved), tokenizer, out_dir, inputs=inputs, **kwargs)


# -------------------------------------------------------------------------------------------------- statistics


def corpus_stats(resolved, tokenizer) -> list[dict]:
    """Per input file (or hub id): documents, words (whitespace), characters, tokens (no EOS), tokens per word.

    >>> corpus_stats(resolve_source({"path": "data/az/train/*.txt"}, root), tok)[0]  # doctest: +SKIP
    {'source': 'edu_articles.txt', 'documents': 659, 'words': 21874, 'characters': 168003, 'tokens': 32112, ...}
    """
    from ..data import iter_documents
    from ..text import whitespace_words

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
