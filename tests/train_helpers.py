"""Shared pieces of the model/training tests: a tiny tokenizer and token files from the fixture corpus.

Import the fixture into a test module (``from train_helpers import data, tiny_params``).
"""

from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path

import pytest

from conftest import FIXTURES, TINY_MODEL

TINY_TRAIN = {"batch_size": 4, "block_size": 32, "max_steps": 12, "warmup_steps": 2, "eval_steps": 6,
              "save_steps": 4, "save_total_limit": 2, "logging_steps": 1, "eval_max_tokens": 1024,
              "eval_batch_size": 8, "untimed_steps": 1, "lr": 3e-3}


def tiny_params(art: Path, overrides: dict | None = None, **train):
    """The config of a tiny run on the fixture corpus whose artifacts go under ``art`` (``overrides``: more params,
    laid over it)."""
    from azllm.config import deep_update, load_params

    t = copy.deepcopy(TINY_TRAIN)
    t.update(train)
    return load_params(None, overrides=deep_update({
        "run_name": "t", "seed": 1234,
        "data": {"root": str(FIXTURES),
                 "train": {"path": "data/az/train/*.txt", "max_bytes_per_file": 25_000},
                 "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt", "max_lines": 60}}},
        "tokenizer": {"vocab_size": 512, "model_type": "unigram"}, "model": {"config": copy.deepcopy(TINY_MODEL)},
        "train": t}, copy.deepcopy(overrides or {})))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """``{"P", "art", "tokenizer", "train", "val", "dev"}``: tokenizer + token files of the fixture corpus."""
    art = tmp_path_factory.mktemp("art")
    os.environ["AZLLM_ARTIFACTS"] = str(art)
    from azllm.run import prepare_data

    P = tiny_params(art)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = prepare_data(P, progress=False)
    d["P"], d["art"] = P, art
    return d
