"""Token files (notebook 02): the corpus through the run's tokenizer into ``train.bin`` / ``val.bin``.

Reads ``tokens`` (and, through the other recipes, ``data``, ``corpus`` and ``tokenizer``).
:func:`prepare_data` is what every training stage starts from: the run's tokenizer, its token files and one token
file per ``data.eval`` set. :func:`prepare` (``azllm prepare PARAMS``) makes them once and marks the folder complete;
:func:`prepare_once` is what ``azllm train`` calls on every rank: it opens a complete folder, or lets rank 0 prepare
while the others wait. :func:`encoder_benchmark` measures the encoder (``azllm bench encoder PARAMS``).
What notebook 02 shows and records: :func:`split_summary` and :func:`split_rows` (the split),
:func:`encoder_record` (the benchmark's medians and ratios).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..config import Config
from .corpus import corpus_source
from .paths import Paths
from .sources import resolve
from .tokenizers import run_tokenizer

__all__ = [
    "token_files",
    "dev_token_files",
    "prepare_data",
    "prepare",
    "open_prepared",
    "prepare_once",
    "data_key",
    "encoder_benchmark",
    "split_summary",
    "split_rows",
    "encoder_record",
]


def token_files(cfg: Config, tokenizer, progress: bool = True) -> dict:
    """The corpus recipe's source encoded into ``train.bin`` / ``val.bin`` (:func:`azllm.tokens.encode_source`)
    in :attr:`Paths.tokens`."""
    from ..tokens import encode_source

    t = cfg.tokens
    return encode_source(
        corpus_source(cfg),
        tokenizer,
        Paths.of(cfg).tokens,
        val_fraction=t.val_fraction,
        seed=t.split_seed,
        num_workers=t.num_workers,
        chunk_docs=t.chunk_docs,
        progress=progress,
    )


def dev_token_files(cfg: Config, tokenizer) -> dict[str, Path]:
    """Each ``data.eval`` set, whole, in its own token file (:meth:`Paths.dev_tokens`)."""
    from ..tokens import encode_source

    return {
        name: encode_source(
            resolve(cfg, spec), tokenizer, Paths.of(cfg).dev_tokens(name), val_fraction=0.0, seed=0, progress=False
        )["train"]
        for name, spec in cfg.data.eval.items()
    }


def prepare_data(cfg: Config, *, progress: bool = True) -> dict:
    """The run's tokenizer and token files: ``{"tokenizer": Tok, "train", "val", "dev": {name: path}, "encode"}``."""
    tok = run_tokenizer(cfg)
    res = token_files(cfg, tok, progress=progress)
    return {
        "tokenizer": tok,
        "train": res["train"],
        "val": res["val"],
        "dev": dev_token_files(cfg, tok),
        "encode": {k: v for k, v in res.items() if isinstance(v, (int, float, str, bool))},
    }


# ------------------------------------------------------------------------------------- prepare once, train many

PREPARED = "prepared.json"
"""The completion marker of :func:`prepare`, in the token files' folder (:attr:`Paths.tokens`)."""
PREPARE_LOG = "prepare.log.jsonl"
"""One line per preparation that ran in that folder (rank, host, pid, start, seconds): who prepared, how often."""
FAILED = "prepare.failed.json"
"""Written by the preparing rank when preparation fails, so that the waiting ranks stop at once."""


def data_key(cfg: Config) -> str:
    """What the prepared data depends on: ``data``, ``corpus``, ``tokenizer``, ``tokens`` and the seed, without
    where things are (``data.root``, ``tokens.dir``) or how fast they are made (encoding threads, the benchmark), so
    the same params on a laptop, a cluster and in a SageMaker job give one key."""
    from ..utils import json_hash

    data = cfg.data.model_dump(exclude={"root"})
    tokens = cfg.tokens.model_dump(exclude={"dir", "num_workers", "benchmark", "prepare_timeout_s"})
    corpus = cfg.corpus.model_dump(exclude={"tasks", "workers", "executor", "ray", "slurm"})
    return json_hash(
        {"data": data, "corpus": corpus, "tokenizer": cfg.tokenizer.model_dump(), "tokens": tokens, "seed": cfg.seed}
    )


def prepare(cfg: Config, *, progress: bool = True) -> Path:
    """Make the run's tokenizer and token files (:func:`prepare_data`) and mark them complete: the tokenizer is
    copied beside the token files, the dev sets are encoded there, and ``prepared.json`` is written last
    (atomically). Returns the marker's path. This is ``azllm prepare PARAMS``; a folder with a marker of the same
    :func:`data_key` is what :func:`open_prepared` opens, anywhere (another machine, a SageMaker input channel)."""
    import shutil
    import socket
    import time

    from ..utils import atomic_write_json

    folder = Paths.of(cfg).tokens
    folder.mkdir(parents=True, exist_ok=True)
    start = time.time()
    data = prepare_data(cfg, progress=progress)
    tok = data["tokenizer"]
    tokenizer = None
    if not cfg.tokens.tokenizer:  # trained by the run: the folder travels with the token files
        dest = folder / "tokenizer"
        if Path(tok.path).resolve() != dest.resolve():
            tmp = folder / f".tokenizer.{os.getpid()}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(tok.path, tmp)
            shutil.rmtree(dest, ignore_errors=True)
            os.replace(tmp, dest)
        tokenizer = "tokenizer"
    dev = {}
    for name, path in data["dev"].items():
        dest = folder / "dev" / name / "train.bin"
        if Path(path).resolve() != dest.resolve():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest.with_name(".train.bin.tmp"))
            os.replace(dest.with_name(".train.bin.tmp"), dest)
        dev[name] = str(dest.relative_to(folder))
    rank = int(os.environ.get("RANK", "0"))
    entry = {
        "key": data_key(cfg),
        "rank": rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "start_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)),
        "seconds": round(time.time() - start, 1),
    }
    with open(folder / PREPARE_LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
    marker = {
        "key": entry["key"],
        "tokenizer": tokenizer,
        "tokenizer_name": tok.name,
        "train": str(Path(data["train"]).relative_to(folder)),
        "val": str(Path(data["val"]).relative_to(folder)),
        "dev": dev,
        "encode": data["encode"],
        "prepared_by": entry,
    }
    return atomic_write_json(folder / PREPARED, marker)


def open_prepared(cfg: Config, folder: str | os.PathLike | None = None) -> dict | None:
    """The data of a complete :func:`prepare` in ``folder`` (default :attr:`Paths.tokens`) with this config's
    :func:`data_key`, as :func:`prepare_data` gives it, without reading the corpus or training anything; else None."""
    from ..tokenizer import load_tokenizer

    folder = Path(folder) if folder is not None else Paths.of(cfg).tokens
    try:
        marker = json.loads((folder / PREPARED).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if marker.get("key") != data_key(cfg):
        return None
    if marker["tokenizer"]:
        tok = load_tokenizer(folder / marker["tokenizer"], name=marker.get("tokenizer_name"))
    else:
        tok = run_tokenizer(cfg)  # tokens.tokenizer: a given tokenizer, only loaded
    return {
        "tokenizer": tok,
        "train": folder / marker["train"],
        "val": folder / marker["val"],
        "dev": {k: folder / v for k, v in marker["dev"].items()},
        "encode": marker["encode"],
    }


def prepare_once(cfg: Config, *, progress: bool = True, poll_s: float = 2.0) -> dict:
    """What a training process starts from, prepared once per job.

    - A complete preparation for this config in :attr:`Paths.tokens` (``azllm prepare``, an earlier run, a
      SageMaker input channel, token files kept beside the checkpoints) is opened, nothing more.
    - Else, in a distributed launch (``WORLD_SIZE`` > 1), rank 0 prepares and the other ranks wait for its marker,
      before any collective (so ``ddp_timeout`` does not apply), for at most ``tokens.prepare_timeout_s``. A
      failure of rank 0 stops them at once. The artifacts folder must be one that every rank sees (shared
      storage); without one, run ``azllm prepare`` first and point ``tokens.dir`` at its folder on every node.
    - Else (one process) it prepares.
    """
    import time

    from ..tokens import TokenFileError

    opened = open_prepared(cfg)
    if opened is not None:
        return opened
    folder = Paths.of(cfg).tokens
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1 or rank == 0:
        (folder / FAILED).unlink(missing_ok=True)
        try:
            prepare(cfg, progress=progress)
        except BaseException as e:
            from ..utils import atomic_write_json

            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_json(folder / FAILED, {"key": data_key(cfg), "error": f"{type(e).__name__}: {e}"})
            raise
        return open_prepared(cfg)
    deadline = time.monotonic() + cfg.tokens.prepare_timeout_s
    while time.monotonic() < deadline:
        opened = open_prepared(cfg)
        if opened is not None:
            return opened
        try:
            failed = json.loads((folder / FAILED).read_text())
        except (OSError, json.JSONDecodeError):
            failed = None
        if failed and failed.get("key") == data_key(cfg):
            raise TokenFileError(f"rank {rank}: rank 0 failed to prepare the data in {folder}: {failed['error']}")
        time.sleep(poll_s)
    raise TokenFileError(
        f"rank {rank} waited {cfg.tokens.prepare_timeout_s:.0f} s (tokens.prepare_timeout_s) for rank 0 to prepare "
        f"the data in {folder} ({PREPARED} never appeared). If the ranks do not share that folder, run "
        "`azllm prepare PARAMS` once and point tokens.dir at its folder on every node."
    )


def encoder_benchmark(cfg: Config, tokenizer, out_json: str | os.PathLike | None = None) -> dict:
    """:func:`azllm.bench.encoder.benchmark` with ``tokens.benchmark`` on ``data.train``. ``quick``: one round,
    50 KB per file unless ``max_bytes_per_file``, 3 training steps. Work files: :attr:`Paths.encoder_bench`."""
    from ..bench.encoder import benchmark
    from ..tokens import TokenFileError

    b = cfg.tokens.benchmark
    spec = tokenizer.path or cfg.tokens.tokenizer
    if not spec:
        raise TokenFileError(
            f"tokenizer {tokenizer.name!r} has no path that a benchmark process could load; set "
            "tokens.tokenizer to a folder, a file or a tiktoken name"
        )
    cap = b.max_bytes_per_file if b.max_bytes_per_file is not None else (50_000 if b.quick else None)
    resolved = resolve(cfg, cfg.data.train, **({"max_bytes_per_file": cap} if cap is not None else {}))
    return benchmark(
        resolved,
        spec,
        Paths.of(cfg).encoder_bench,
        scale=b.scale,
        rounds=1 if b.quick else b.rounds,
        batch_size=b.batch_size,
        block_size=b.block_size,
        train_steps=3 if b.quick else 10,
        out_json=out_json,
    )


def split_summary(enc: dict) -> dict:
    """Documents and tokens per split of :func:`token_files`'s result, and the val shares."""
    out = {k: enc[k] for k in ("train_docs", "val_docs", "train_tokens", "val_tokens", "skipped", "dtype")}
    out["val_share_of_docs"] = enc["val_docs"] / (enc["train_docs"] + enc["val_docs"])
    out["val_share_of_tokens"] = enc["val_tokens"] / (enc["train_tokens"] + enc["val_tokens"])
    return out


def split_rows(enc: dict) -> list[dict]:
    """One row per split: documents, tokens, file size in MB (10**6 bytes)."""
    return [
        {
            "split": s,
            "documents": enc[f"{s}_docs"],
            "tokens": enc[f"{s}_tokens"],
            "file_mb": Path(enc[s]).stat().st_size / 1e6,
        }
        for s in ("train", "val")
    ]


def encoder_record(bench: dict) -> dict:
    """What ``metrics.json`` keeps of :func:`encoder_benchmark` (section ``tokens_benchmark``): one row per encoder
    and scale (``variants``: :func:`azllm.bench.encoder.variant_rows`, the medians with the speeds against the
    limit and against (a)), the ratios, the ``get_batch`` timing, the targets, the scale, rounds, corpus, the load
    average before and after and the cores."""
    return {
        "variants": bench["rows"],
        **{k: bench[k] for k in ("get_batch", "ratios", "targets", "scale", "rounds", "corpus")},
        "load_avg_1min": bench.get("load_avg_1min"),
        "cpu_count": bench.get("machine", {}).get("cpu_count"),
    }
