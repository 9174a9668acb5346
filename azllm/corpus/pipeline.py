"""The corpus stage on HF datatrove: read -> quality -> language -> decontamination -> exact dedup -> MinHash dedup.

Why datatrove: its pipeline steps run unchanged under its local executor (all cores of one machine, here and in
the tests) and its Slurm and Ray executors (a cluster), and it ships the multi-stage, disk-backed exact and MinHash
deduplication that keeps memory flat at any corpus size. azllm adds the Azerbaijani parts as datatrove steps:
the reader (:mod:`azllm.data`: .txt/.jsonl/.parquet files or a hub dataset), the quality rules
(:mod:`.quality`), language identification (:mod:`.language`) and decontamination (:mod:`.decontaminate`).

Six executor runs, in ``<out>.work/`` (datatrove marks each finished task there, so a killed run resumes where it
stopped): 1. read + filters + exact-dedup hashes -> ``filtered/``; 2. exact duplicates found; 3. exact duplicates
dropped + MinHash signatures -> ``exact/``; 4. LSH buckets; 5. clusters; 6. near duplicates dropped -> ``clean/``.
Every dropped document is kept in ``removed/<step>/`` with its reason. :func:`clean_corpus` then writes
``manifest.json`` and renames the work folder to ``<out>``: a folder without a manifest is never taken as a
finished corpus.
"""

from __future__ import annotations

import gzip
import heapq
import json
import re
from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.pipeline.writers.jsonl import JsonlWriter
from datatrove.utils.word_tokenizers import WordTokenizer

from ..data import DataError, Resolved, iter_documents, iter_file_part
from ..text import az_lower
from . import decontaminate, language, quality

__all__ = [
    "SourceReader",
    "TouchShard",
    "LanguageFilter",
    "QualityFilter",
    "DecontaminationFilter",
    "AzWords",
    "exact_key",
    "source_name",
    "writer",
    "STEPS",
    "read_jsonl",
    "in_input_order",
]

STEPS = ("quality", "language", "decontamination", "exact_dedup", "near_dedup")


def source_name(origin: str) -> str:
    """The name a document's source goes by in tables: a file's stem, or the hub id.

    >>> source_name("/data/az/train/legal_codes.txt"), source_name("wikimedia/wikipedia")
    ('legal_codes', 'wikimedia/wikipedia')
    """
    p = Path(origin)
    return p.name.split(".")[0] if p.suffix else origin


def writer(folder: Path) -> JsonlWriter:
    """Uncompressed jsonl, one file per task (``00000.jsonl``): :mod:`azllm.data` reads them back."""
    return JsonlWriter(str(folder), output_filename="${rank}.jsonl", compression=None)


class SourceReader(PipelineStep):
    """Documents of the sources (normalized by :func:`azllm.data.iter_documents`), each tagged with its source.

    A source of files without caps is split by size: task ``rank`` of ``world_size`` reads piece ``rank`` of every
    file (:func:`azllm.data.iter_file_part`: the lines that start in its byte range, or its parquet row groups), so
    one 8 GB file spreads over every task and no task reads what another keeps; a document's number is then its
    byte offset (row for parquet). A capped source is read in order (a cap depends on what came before): whole
    files per task when it has at least ``world_size`` files and no source-wide cap, else every
    ``world_size``-th document. ``metadata.order`` (source, file, position) is the input order, which
    :func:`in_input_order` restores across tasks."""

    name = "azllm sources"
    type = "📖 - READER"

    def __init__(self, sources: list[Resolved]):
        super().__init__()
        self.sources = sources

    def _parts(self, r: Resolved, rank: int, world: int) -> tuple[list[Resolved], bool]:
        by_file = r.kind == "files" and len(r.files) >= world and r.max_bytes is None and r.max_lines is None
        if not by_file:
            return [r], True
        mine = [Resolved(**{**r.__dict__, "files": [f]}) for f in r.files[rank::world]]
        return mine, False

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        for s, r in enumerate(self.sources):
            if r.kind == "files" and r.max_bytes is None and r.max_lines is None and r.max_bytes_per_file is None:
                for f, path in enumerate(r.files):
                    name = source_name(str(path))
                    for pos, text in iter_file_part(path, rank, world_size, r.text_field):
                        self.stat_update("documents")
                        yield Document(
                            text=text, id=f"{name}/{f}/{pos}", metadata={"source": name, "order": [s, f, pos]}
                        )
                continue
            file_no = {str(f): j for j, f in enumerate(r.files)}
            parts, stride = self._parts(r, rank, world_size)
            for part in parts:
                seen: dict[str, int] = {}
                for i, (origin, text) in enumerate(iter_documents(part, with_origin=True)):
                    n = seen[origin] = seen.get(origin, -1) + 1
                    if stride and i % world_size != rank:
                        continue
                    self.stat_update("documents")
                    f = file_no.get(origin, 0)
                    yield Document(
                        text=text,
                        id=f"{source_name(origin)}/{f}/{n}",
                        metadata={"source": source_name(origin), "order": [s, f, n]},
                    )


class TouchShard(PipelineStep):
    """Creates this task's shard file in ``folder`` (empty until a writer fills it) and passes the documents on:
    a later step reads shard ``i`` as task ``i``, also when task ``i`` kept nothing, on any executor."""

    name = "azllm shard"
    type = "💾 - WRITER"

    def __init__(self, folder: str | Path):
        super().__init__()
        self.folder = str(folder)

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        (Path(self.folder) / f"{rank:05d}.jsonl").touch()
        if data is not None:
            yield from data


class LanguageFilter(BaseFilter):
    """Keeps documents whose :func:`azllm.corpus.language.detect` label is in ``keep``; tags every one."""

    name = "azllm language"

    def __init__(self, keep: list[str], exclusion_writer=None, batch_size: int = 256):
        super().__init__(exclusion_writer, batch_size=batch_size)
        self.keep = set(keep)

    def filter(self, doc):
        return self.filter_batch([doc])[0]

    def filter_batch(self, batch):
        out = []
        for doc, lab in zip(batch, language.detect([d.text for d in batch])):
            doc.metadata["lang"] = lab
            out.append(True if lab in self.keep else (False, lab))
        return out


class QualityFilter(BaseFilter):
    """Drops documents that break a rule of :func:`azllm.corpus.quality.quality_problem` (reason: the rule)."""

    name = "azllm quality"

    def __init__(self, rules: dict, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.rules = dict(rules)

    def filter(self, doc):
        problem = quality.quality_problem(doc.text, **self.rules)
        return True if problem is None else (False, problem)


class DecontaminationFilter(BaseFilter):
    """Drops documents sharing an n-gram with an evaluation line; the hit is recorded as ``eval_set:line``."""

    name = "azllm decontamination"

    def __init__(self, eval_lines: dict[str, list[str]], n: int, min_words: int, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.names = []
        lines = []
        for name, ls in eval_lines.items():
            self.names += [(name, i) for i in range(len(ls))]
            lines += ls
        self.index = decontaminate.eval_index(lines, n=n, min_words=min_words)

    def filter(self, doc):
        hit = decontaminate.contaminated_by(doc.text, self.index)
        if hit is None:
            return True
        name, line = self.names[hit]
        doc.metadata["eval_hit"] = f"{name}:{line}"
        return False, "contaminated"


_WORD = re.compile(r"\w+")


class AzWords(WordTokenizer):
    """Words for MinHash n-grams: ``\\w+`` runs (datatrove's default for Azerbaijani needs spaCy)."""

    def word_tokenize(self, text: str) -> list[str]:
        return _WORD.findall(text)

    def sent_tokenize(self, text: str) -> list[str]:
        return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer(r"\S.*?(?:[.!?](?=\s)|$)", text)]


def exact_key(doc: Document) -> str:
    """What exact deduplication compares: Azerbaijani lowercase (``İ``->``i``, ``I``->``ı``), whitespace
    collapsed (datatrove hashes it)."""
    return " ".join(az_lower(doc.text).split())


def read_jsonl(folder: Path):
    """Every record of a ``.jsonl`` file, or of the ``*.jsonl`` / ``*.jsonl.gz`` files under a folder, in order."""
    folder = Path(folder)
    files = [folder] if folder.is_file() else sorted(folder.rglob("*.jsonl*"))
    for f in files:
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)


def hub_fingerprint(r: Resolved) -> str:
    """Download a hub source once into the datasets cache (later reads come from there) and return the
    fingerprint ``datasets`` gives its content."""
    from datasets import load_dataset

    return load_dataset(r.hub, r.config, split=r.split)._fingerprint


def in_input_order(folder: Path):
    """The records of a stage's output folder merged back into input order (streaming)."""
    shards = sorted(Path(folder).glob("*.jsonl"))
    return heapq.merge(*(read_jsonl(f) for f in shards), key=lambda r: r["metadata"]["order"])


def input_ids(sources: list[Resolved]) -> list[dict]:
    """What identifies the inputs: each file's sha256, or a hub dataset's id, config and split."""
    out = []
    for r in sources:
        if r.kind == "files":
            out += [{"file": str(f), "sha256": s} for f, s in r.sha256s().items()]
        else:
            out.append({"hub": r.hub, "config": r.config, "split": r.split, "fingerprint": hub_fingerprint(r)})
        out[-1].update(max_bytes=r.max_bytes, max_bytes_per_file=r.max_bytes_per_file, max_lines=r.max_lines)
    if not out:
        raise DataError("corpus: no input source")
    return out
