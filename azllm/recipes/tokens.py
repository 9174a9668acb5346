"""Token files (notebook 02): the corpus through the run's tokenizer into ``train.bin`` / ``val.bin``.

Reads ``tokens`` (and, through the other recipes, ``data``, ``corpus`` and ``tokenizer``).
:func:`prepare_data` is what every training stage starts from: the run's tokenizer, its token files and one token
file per ``data.eval`` set. :func:`encoder_benchmark` measures the encoder (``azllm bench encoder PARAMS``).
What notebook 02 shows and records: :func:`split_summary` and :func:`split_rows` (the split),
:func:`encoder_record` (the benchmark's medians and ratios).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..config import Config
from .corpus import corpus_source
from .paths import Paths
from .sources import resolve
from .tokenizers import main_tokenizer

__all__ = [
    "token_files",
    "dev_token_files",
    "prepare_data",
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
        Paths(cfg).tokens,
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
            resolve(cfg, spec), tokenizer, Paths(cfg).dev_tokens(name), val_fraction=0.0, seed=0, progress=False
        )["train"]
        for name, spec in cfg.data.eval.items()
    }


def prepare_data(cfg: Config, *, progress: bool = True) -> dict:
    """The run's tokenizer and token files: ``{"tokenizer": Tok, "train", "val", "dev": {name: path}, "encode"}``."""
    tok = main_tokenizer(cfg)
    res = token_files(cfg, tok, progress=progress)
    return {
        "tokenizer": tok,
        "train": res["train"],
        "val": res["val"],
        "dev": dev_token_files(cfg, tok),
        "encode": {k: v for k, v in res.items() if isinstance(v, (int, float, str, bool))},
    }


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
        Paths(cfg).encoder_bench,
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
