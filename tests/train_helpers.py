"""Shared pieces of the model/training tests: a tiny tokenizer and token files from a slice of the shared corpus.

Import the fixtures into a test module (``from train_helpers import data, tiny_params``); they skip cleanly when
``AZLLM_DATA_ROOT`` is not set.
"""

from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path

import pytest

TINY_MODEL = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
              "num_key_value_heads": 2}
TINY_TRAIN = {"batch_size": 4, "block_size": 32, "max_steps": 12, "warmup_steps": 2, "eval_steps": 6,
              "save_steps": 4, "save_total_limit": 2, "logging_steps": 1, "eval_max_tokens": 1024,
              "eval_batch_size": 8, "timing_warmup_steps": 1, "lr": 3e-3}


def need_data_root() -> Path:
    root = os.environ.get("AZLLM_DATA_ROOT")
    if not root or not (Path(root) / "data" / "az" / "train").is_dir():
        pytest.skip("AZLLM_DATA_ROOT is not set (or has no data/az/train): the training tests need the shared "
                    "corpus; run them through `make test` or set AZLLM_DATA_ROOT=/path/to/shared")
    return Path(root)


def tiny_params(art: Path, **train) -> dict:
    """Params of a tiny run whose artifacts go under ``art``."""
    from azllm.config import load_params

    t = copy.deepcopy(TINY_TRAIN)
    t.update(train)
    return load_params(None, overrides={
        "run_name": "t", "seed": 1234,
        "data": {"train": {"path": "data/az/train/*.txt", "max_bytes_per_file": 25_000},
                 "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt", "max_lines": 60}}},
        "tokenizer": {"vocab_size": 512}, "model": {"config": copy.deepcopy(TINY_MODEL)}, "train": t})


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """``{"P", "art", "tokenizer", "train", "val", "dev"}``: tokenizer + token files of a tiny corpus slice."""
    need_data_root()
    art = tmp_path_factory.mktemp("art")
    os.environ["AZLLM_ARTIFACTS"] = str(art)
    from azllm.train import prepare_data

    P = tiny_params(art)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = prepare_data(P, progress=False)
    d["P"], d["art"] = P, art
    return d
