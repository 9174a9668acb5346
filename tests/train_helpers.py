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

TINY_TRAIN = {
    "batch_size": 4,
    "block_size": 32,
    "max_steps": 12,
    "warmup_steps": 2,
    "eval_steps": 6,
    "save_steps": 4,
    "save_total_limit": 2,
    "logging_steps": 1,
    "eval_max_tokens": 1024,
    "eval_batch_size": 8,
    "untimed_steps": 1,
    "lr": 3e-3,
}


def tiny_params(art: Path, overrides: dict | None = None, **train):
    """The config of a tiny run on the fixture corpus whose artifacts go under ``art`` (``overrides``: more params,
    laid over it)."""
    from azllm.config import deep_update, load_params

    t = copy.deepcopy(TINY_TRAIN)
    t.update(train)
    return load_params(
        None,
        overrides=deep_update(
            {
                "run_name": "t",
                "seed": 1234,
                "data": {
                    "root": str(FIXTURES),
                    "train": {"path": "data/az/train/*.txt", "max_bytes_per_file": 25_000},
                    "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt", "max_lines": 60}},
                },
                "tokenizer": {"vocab_size": 512, "model_type": "unigram"},
                "model": {"config": copy.deepcopy(TINY_MODEL)},
                "train": t,
            },
            copy.deepcopy(overrides or {}),
        ),
    )


def tiny_params_file(path: Path, run_name: str, train: dict, **sections) -> Path:
    """A params YAML as a user writes one, for the command-line tests: the fixture corpus (15 KB per file), 40 FLORES
    lines, a 400-piece unigram tokenizer, the tiny model, ``train`` and any other ``sections`` (e.g. ``corpus``)."""
    import yaml

    params = {
        "run_name": run_name,
        "data": {
            "root": str(FIXTURES),
            "train": {"path": "data/az/train/*.txt", "max_bytes_per_file": 15000},
            "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt", "max_lines": 40}},
        },
        "tokenizer": {"vocab_size": 400, "model_type": "unigram"},
        "model": {"config": TINY_MODEL},
        "train": train,
        **sections,
    }
    path.write_text(yaml.safe_dump(params))
    return path


def prepare_tiny_data(art: Path) -> dict:
    """``{"P", "art", "tokenizer", "train", "val", "dev"}``: the tokenizer and token files of :func:`tiny_params`
    under ``art`` (conftest's session fixture ``tiny_data`` makes them once per worker)."""
    from azllm.recipes.tokens import prepare_data

    os.environ["AZLLM_ARTIFACTS"] = str(art)
    P = tiny_params(art)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = prepare_data(P, progress=False)
    d["P"], d["art"] = P, art
    return d


@pytest.fixture(scope="module")
def data(tiny_data):
    """The session's :func:`prepare_tiny_data` (one preparation per worker: the files that import this fixture go to
    one worker, conftest.WORKER_SHARED_FIXTURES), with ``$AZLLM_ARTIFACTS`` pointing at its artifacts for the
    module. A test trains into its own folder, or into ``art`` under a key of its own."""
    os.environ["AZLLM_ARTIFACTS"] = str(tiny_data["art"])
    return dict(tiny_data)


def simulated_sagemaker_job(tmp_path: Path, params_file: Path, *, max_steps: int, every: int) -> dict:
    """Write a tiny LoRA params file for a SageMaker job and return the job's environment: SM_* folders under
    ``tmp_path``, the fixture corpus as the ``data`` channel, no data root of the caller's."""
    import yaml

    params = {
        "run_name": "sm",
        "data": {
            "train": {"path": "data/az/train/*.txt", "max_bytes_per_file": 20000},
            "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt", "max_lines": 50}},
        },
        "tokenizer": {"vocab_size": 512, "model_type": "unigram"},
        "model": {"config": TINY_MODEL},
        "train": {
            "method": "lora",
            "batch_size": 4,
            "block_size": 32,
            "max_steps": max_steps,
            "eval_steps": every,
            "save_steps": every,
            "save_total_limit": 1,
            "logging_steps": every,
            "eval_max_tokens": 512,
            "untimed_steps": 1,
            "report_to": [],
        },
    }
    params_file.write_text(yaml.safe_dump(params))
    sm = {
        "SM_MODEL_DIR": tmp_path / "model",
        "SM_OUTPUT_DATA_DIR": tmp_path / "output",
        "SM_CHANNEL_DATA": FIXTURES,
        "AZLLM_CHECKPOINT_DIR": tmp_path / "checkpoints",
        "SM_NUM_GPUS": 0,
        "SM_HOSTS": '["algo-1"]',
        "AZLLM_ARTIFACTS": tmp_path / "artifacts",
    }
    return {**{k: v for k, v in os.environ.items() if k != "AZLLM_DATA_ROOT"}, **{k: str(v) for k, v in sm.items()}}
