"""Data sources: local txt / jsonl / parquet files or a Hugging Face Hub dataset, read through one function.

A source is a plain dict (the fields of :class:`azllm.config.SourceConfig`)::

    {"path": "data/az/train/*.txt", "hub": "wikimedia/wikipedia", "config": "20231101.az",
     "split": "train", "text_field": "text", "max_bytes": 20_000_000, ...}

:func:`resolve_source` decides where it comes from: the local ``path`` (a glob, relative to the data root unless
absolute) when it matches files, otherwise the ``hub`` dataset, streamed with ``datasets.load_dataset(...,
streaming=True)`` and capped by ``max_bytes`` / ``max_lines``. A local folder given as ``hub`` goes through the
very same ``load_dataset`` call, which is how the tests exercise the hub path offline.

Documents: in a ``.txt`` file each non-empty line is one document (the shared corpus is one paragraph per line);
in ``.jsonl`` / ``.parquet`` / hub datasets each record's ``text_field`` is one document. Documents are passed
through :func:`azllm.text.normalize` unless ``normalize=False``.

Errors are explicit: a non-UTF-8 file names the file and the byte offset, an empty source says so, a source that
is neither found locally nor named on the hub says what was tried.
"""

from __future__ import annotations

import glob as _glob
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .text import normalize as _normalize

__all__ = [
    "DataError",
    "Resolved",
    "resolve_source",
    "under_root",
    "iter_documents",
    "iter_file_part",
    "byte_ranges",
    "read_lines",
    "file_sha256",
    "source_lines",
]


class DataError(ValueError):
    """Bad or missing input data."""


@dataclass
class Resolved:
    """Where a source's documents come from: ``kind`` is ``"files"`` or ``"hub"``."""

    kind: str
    files: list[Path] = field(default_factory=list)
    hub: str | None = None
    config: str | None = None
    split: str = "train"
    text_field: str = "text"
    max_bytes: int | None = None
    max_bytes_per_file: int | None = None
    max_lines: int | None = None
    skip_lines: int = 0
    """The first this many records of the source (across its files, in order) are skipped, before any cap."""
    streaming: bool = True
    """Hub only: stream (nothing stored), or download once into the datasets cache (the corpus stage)."""

    def describe(self) -> str:
        if self.kind == "files":
            return (
                f"{len(self.files)} local file(s): "
                + ", ".join(str(f) for f in self.files[:4])
                + (" ..." if len(self.files) > 4 else "")
            )
        how = "streamed" if self.streaming else "cached"
        return f"hub dataset {self.hub} (config={self.config}, split={self.split}, {how})"

    def sha256s(self) -> dict[str, str]:
        """sha256 of each local input file (empty for hub sources, whose revision the hub records)."""
        return {str(f): file_sha256(f) for f in self.files}


def under_root(path: str | os.PathLike, root: str | os.PathLike | None) -> Path | None:
    """``path`` (``~`` expanded) under the data root ``root`` unless it is absolute; None for a relative path
    without a root. The one place where "relative to the data root" is decided.

    >>> under_root("data/x.txt", "/d"), under_root("/abs/x.txt", "/d"), under_root("x.txt", None)
    (PosixPath('/d/data/x.txt'), PosixPath('/abs/x.txt'), None)
    """
    p = Path(os.path.expanduser(str(path)))
    if p.is_absolute():
        return p
    return Path(root) / p if root is not None else None


def resolve_source(spec: dict, root: Path | None) -> Resolved:
    """Resolve a source dict (``SourceConfig.model_dump()``) against the data root.

    >>> r = resolve_source({"path": "/etc/hostname"}, None)
    >>> r.kind, r.files[0].name
    ('files', 'hostname')
    """
    tried = []
    path = spec.get("path")
    common = dict(
        max_bytes=spec.get("max_bytes"),
        max_lines=spec.get("max_lines"),
        skip_lines=spec.get("skip_lines") or 0,
        max_bytes_per_file=spec.get("max_bytes_per_file"),
        text_field=spec.get("text_field") or "text",
    )
    if path:
        p = under_root(path, root)
        if p is None:
            tried.append(f"local path {path!r} (no data root: set AZLLM_DATA_ROOT or data.root)")
        else:
            files = sorted(Path(f) for f in _glob.glob(str(p)) if Path(f).is_file())
            if files:
                return Resolved("files", files=files, **common)
            tried.append(f"local path {p} (no such file)")
    hub = spec.get("hub")
    if hub:
        return Resolved("hub", hub=hub, config=spec.get("config"), split=spec.get("split") or "train", **common)
    raise DataError("cannot find data source: tried " + "; ".join(tried or ["nothing: neither path nor hub given"]))


def read_lines(path: str | os.PathLike) -> Iterator[str]:
    """Lines of a UTF-8 text file (without line ends). A byte sequence that is not UTF-8 raises
    :class:`DataError` naming the file, the line and the byte offset.
    """
    path = Path(path)
    offset = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(
                    f"{path}: not valid UTF-8 at byte offset {offset + e.start} (line {lineno}): "
                    f"{raw[max(0, e.start - 8) : e.start + 8]!r}. Convert the file to UTF-8 (e.g. iconv)."
                ) from None
            offset += len(raw)
            yield line.rstrip("\r\n")


def _record_text(line: str, text_field: str, where: str):
    """The text field of one jsonl record, or a :class:`DataError` that names ``where`` it is."""
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise DataError(f"{where}: not valid JSON: {e}") from None
    if text_field not in rec:
        raise DataError(f"{where}: no field {text_field!r} (fields: {sorted(rec)})")
    return rec[text_field]


def _iter_file(path: Path, text_field: str) -> Iterator[str]:
    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    if suffix in (".txt", ".text", ""):
        yield from read_lines(path)
    elif suffix in (".jsonl", ".json"):
        for lineno, line in enumerate(read_lines(path), 1):
            if line.strip():
                yield _record_text(line, text_field, f"{path}:{lineno}")
    elif suffix == ".parquet":
        pf = _parquet(path, text_field)
        for batch in pf.iter_batches(columns=[text_field], batch_size=1024):
            yield from (t for t in batch.column(0).to_pylist() if t is not None)
    else:
        raise DataError(f"{path}: unsupported file type {suffix!r} (use .txt, .jsonl or .parquet)")


def byte_ranges(size: int, parts: int) -> list[tuple[int, int]]:
    """``[start, end)`` of ``parts`` near-equal pieces of ``[0, size)``.

    >>> byte_ranges(10, 3)
    [(0, 3), (3, 6), (6, 10)]
    """
    return [(size * i // parts, size * (i + 1) // parts) for i in range(parts)]


def _lines_in_range(path: Path, start: int, end: int) -> Iterator[tuple[int, str]]:
    """``(byte offset, line)`` of the lines of ``path`` that start in ``[start, end)``: a line that starts before
    ``start`` belongs to the piece before, so pieces that tile a file read every line once."""
    with open(path, "rb") as f:
        if start > 0:
            f.seek(start - 1)
            f.readline()  # to the end of the line that holds byte start - 1 (just that byte when it ends a line)
        pos = f.tell()
        while pos < end:
            raw = f.readline()
            if not raw:
                return
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(
                    f"{path}: not valid UTF-8 at byte offset {pos + e.start}: "
                    f"{raw[max(0, e.start - 8) : e.start + 8]!r}. Convert the file to UTF-8 (e.g. iconv)."
                ) from None
            yield pos, line.rstrip("\r\n")
            pos += len(raw)


def iter_file_part(
    path: str | os.PathLike, part: int, parts: int, text_field: str = "text"
) -> Iterator[tuple[int, str]]:
    """``(position, normalized document)`` of piece ``part`` of ``parts`` of one file, empty documents skipped: for
    ``.txt`` / ``.jsonl`` the lines that start in the piece's byte range (position: the line's byte offset), for
    ``.parquet`` the rows of the piece's row groups (position: the row number). The pieces of a file give each of
    its documents exactly once, so a large file spreads over every task of the corpus stage and no task reads what
    another keeps.

    >>> [d for _, d in iter_file_part("corpus.txt", 1, 2)]  # doctest: +SKIP
    ['the documents of the second half']
    """
    path = Path(path)
    suffix = path.suffix
    if suffix == ".parquet":
        pf = _parquet(path, text_field)
        n = pf.num_row_groups
        lo, hi = byte_ranges(n, parts)[part]
        row = sum(pf.metadata.row_group(g).num_rows for g in range(lo))
        for g in range(lo, hi):
            for t in pf.read_row_group(g, columns=[text_field]).column(0).to_pylist():
                if t is not None and (doc := _normalize(t)):
                    yield row, doc
                row += 1
        return
    if suffix not in (".txt", ".text", "", ".jsonl", ".json"):
        raise DataError(f"{path}: unsupported file type {suffix!r} (use .txt, .jsonl or .parquet)")
    start, end = byte_ranges(path.stat().st_size, parts)[part]
    for pos, line in _lines_in_range(path, start, end):
        if suffix in (".jsonl", ".json"):
            if not line.strip():
                continue
            line = _record_text(line, text_field, f"{path} at byte {pos}")
        doc = _normalize(line) if line is not None else ""
        if doc:
            yield pos, doc


def _parquet(path: Path, text_field: str):
    """The open parquet file, or a :class:`DataError` that says what is wrong with it."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for a damaged file
        raise DataError(
            f"{path}: not a readable parquet file ({type(e).__name__}: {e}). Re-download or "
            "re-export it, or remove it from the source's path glob."
        ) from None
    if text_field not in pf.schema_arrow.names:
        raise DataError(f"{path}: no column {text_field!r} (columns: {pf.schema_arrow.names})")
    return pf


def _iter_hub(r: Resolved) -> Iterator[str]:
    from datasets import load_dataset

    ds = load_dataset(r.hub, r.config, split=r.split, streaming=r.streaming)
    for rec in ds:
        if r.text_field not in rec:
            raise DataError(f"hub dataset {r.hub}: no field {r.text_field!r} (fields: {sorted(rec)})")
        yield rec[r.text_field]


def iter_documents(r: Resolved, normalize: bool = True, with_origin: bool = False) -> Iterator:
    """Yield the documents of a resolved source (normalized, empty ones skipped), honouring the caps.

    With ``with_origin=True`` yield ``(origin, document)`` where origin is the file path or the hub id, so that
    callers can report statistics per file.
    Raises :class:`DataError` if the source yields no document at all.
    """
    n_docs = 0
    n_bytes = 0
    to_skip = r.skip_lines
    sources = [(str(f), _iter_file(f, r.text_field)) for f in r.files] if r.kind == "files" else [(r.hub, _iter_hub(r))]
    for origin, docs in sources:
        file_bytes = 0
        for doc in docs:
            if to_skip:
                to_skip -= 1
                continue
            if normalize:
                doc = _normalize(doc)
            elif doc is not None:
                doc = doc.strip()
            if not doc:
                continue
            b = len(doc.encode("utf-8"))
            if r.max_bytes is not None and n_bytes + b > r.max_bytes:
                _check_nonempty(n_docs, r)
                return
            if r.max_bytes_per_file is not None and file_bytes + b > r.max_bytes_per_file:
                break
            n_bytes += b
            file_bytes += b
            n_docs += 1
            yield (origin, doc) if with_origin else doc
            if r.max_lines is not None and n_docs >= r.max_lines:
                return
    _check_nonempty(n_docs, r)


def _check_nonempty(n_docs: int, r: Resolved) -> None:
    if n_docs == 0:
        raise DataError(f"empty corpus: {r.describe()} holds no non-empty document")


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 hex digest of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_lines(r: Resolved) -> list[str]:
    """Every line (record) of a source in order from ``skip_lines`` on, empty ones kept, capped by ``max_lines``
    only: the sides of a
    line-parallel set stay aligned line by line. Not normalized."""
    out, to_skip = [], r.skip_lines
    for origin in r.files if r.kind == "files" else [None]:
        it = _iter_file(origin, r.text_field) if origin is not None else _iter_hub(r)
        for t in it:
            if to_skip:
                to_skip -= 1
                continue
            out.append(t)
            if r.max_lines is not None and len(out) >= r.max_lines:
                return out
    return out
