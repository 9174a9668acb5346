"""Token files three ways on the same text and tokenizer, each in a fresh process
(:func:`azllm.bench.process.run_fresh`):

- ``azllm``: :func:`azllm.tokens.encode_corpus` (the folder's SentencePiece engine on threads, resumable parts,
  document index, atomic files);
- ``datasets``: nanoGPT's ``prepare.py`` way: ``datasets.load_dataset("text")`` (an Arrow copy), ``.map`` of one
  document at a time through the tokenizer's ``tokenizer.json`` (HF ``tokenizers``) on ``num_proc`` processes,
  then the ids concatenated into an ``np.memmap``;
- ``datatrove``: datatrove's ``DocumentTokenizer`` (batched HF ``tokenizers``, ids and a document index per task)
  on a ``LocalPipelineExecutor`` with one task per input file, no shuffling.

Each gets the same input: the documents of one-document-per-line files, as they are (no normalization), and the
same cores. Each returns its seconds, CPU seconds, MB/s per core, peak RSS (its own and its children's) and the
number of tokens it wrote, which is the same for all three when the tokenizer's SentencePiece model and its
``tokenizer.json`` agree (tests/test_recipes_scale.py checks it).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

__all__ = ["PEERS", "encode_azllm", "encode_datasets", "encode_datatrove"]

PEERS = ("azllm", "datasets", "datatrove")


def _lines(files: list[str]) -> Iterator[str]:
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if line:
                    yield line


def _measure(fn, job: dict) -> dict:
    from ..utils import peak_rss_mb

    def cpu() -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    t0, c0 = time.perf_counter(), cpu()
    tokens = fn(job)
    seconds, cpu_s = time.perf_counter() - t0, cpu() - c0
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    mb = sum(os.path.getsize(f) for f in job["files"]) / 1e6
    return {
        "tokens": int(tokens),
        "seconds": seconds,
        "cpu_seconds": cpu_s,
        "mb_per_s_per_core": mb / seconds / job["cores"],
        "peak_rss_mb": max(peak_rss_mb(), children),
    }


def encode_azllm(job: dict) -> dict:
    """``job``: ``{"files", "tokenizer" (a folder), "out", "cores"}``."""
    from ..tokenizer import load_tokenizer
    from ..tokens import encode_corpus

    def run(job: dict) -> int:
        tok = load_tokenizer(job["tokenizer"])
        r = encode_corpus(
            lambda: _lines(job["files"]), tok, job["out"], num_workers=job["cores"], force=True, progress=False
        )
        return r["train_tokens"] + r["val_tokens"]

    return _measure(run, job)


def encode_datasets(job: dict) -> dict:
    """nanoGPT's way (``job`` as :func:`encode_azllm`; the tokenizer folder's ``tokenizer.json`` and EOS)."""

    def run(job: dict) -> int:
        from datasets import disable_progress_bars, load_dataset
        from tokenizers import Tokenizer

        disable_progress_bars()
        tok = Tokenizer.from_file(str(Path(job["tokenizer"]) / "tokenizer.json"))
        eos = tok.token_to_id(job["eos_token"])
        ds = load_dataset("text", data_files=job["files"], split="train", cache_dir=str(Path(job["out"]) / "cache"))

        def process(example):
            ids = tok.encode(example["text"], add_special_tokens=False).ids + [eos]
            return {"ids": ids, "len": len(ids)}

        tokenized = ds.map(process, remove_columns=["text"], num_proc=job["cores"])
        n = int(np.sum(tokenized["len"], dtype=np.uint64))
        arr = np.memmap(Path(job["out"]) / "train.bin", dtype=np.uint16, mode="w+", shape=(n,))
        idx = 0
        shards = 64
        for i in range(shards):
            batch = tokenized.shard(num_shards=shards, index=i, contiguous=True).with_format("numpy")
            if len(batch) == 0:
                continue
            ids = np.concatenate(batch["ids"])
            arr[idx : idx + len(ids)] = ids
            idx += len(ids)
        arr.flush()
        return n

    return _measure(run, job)


def encode_datatrove(job: dict) -> dict:
    """datatrove's ``DocumentTokenizer`` (``job`` as :func:`encode_datasets`)."""

    def run(job: dict) -> int:
        import glob

        from datatrove.data import Document
        from datatrove.executor import LocalPipelineExecutor
        from datatrove.pipeline.tokens import DocumentTokenizer

        files = job["files"]

        def reader(data, rank: int = 0, world_size: int = 1):
            for i, path in enumerate(files):
                if i % world_size == rank:
                    for k, line in enumerate(_lines([path])):
                        yield Document(text=line, id=f"{i}/{k}")

        out = Path(job["out"])
        LocalPipelineExecutor(
            pipeline=[
                reader,
                DocumentTokenizer(
                    str(out / "tokens"),
                    tokenizer_name_or_path=str(Path(job["tokenizer"]) / "tokenizer.json"),
                    eos_token=job["eos_token"],
                    shuffle_documents=False,
                    save_final_metadata=False,
                ),
            ],
            tasks=len(files),
            workers=job["cores"],
            logging_dir=str(out / "logs"),
            skip_completed=False,
        ).run()
        return sum(os.path.getsize(f) for f in glob.glob(str(out / "tokens" / "*.ds"))) // 2

    return _measure(run, job)
