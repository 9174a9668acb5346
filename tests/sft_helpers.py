"""Shared pieces of the SFT tests: tiny base folders (a tokenizer trained on the fixture corpus, or GPT-2's with no
pad token; the tiny Llama of conftest), conversations from the fixture instruction data, a tiny SftSpec.

Import the fixtures into a test module (``from sft_helpers import tiny_base, conversations``).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from azllm.config import load_params
from conftest import FIXTURES, TINY_MODEL

SFT_DIR = FIXTURES / "data" / "az" / "sft"


def make_base(folder: Path, tokenizer_dir: Path | None = None, *, seed: int = 0) -> Path:
    """A tiny base folder: a random Llama (conftest's TINY_MODEL) saved with safetensors next to a tokenizer, no
    chat template. ``tokenizer_dir``: an HF tokenizer folder (default: a 512-piece unigram trained on the fixture
    corpus: has ``<pad>``)."""
    from transformers import AutoTokenizer

    from azllm.data import iter_documents, resolve_source
    from azllm.model import build_model, model_config
    from azllm.tokenizer_train import train_tokenizer

    folder = Path(folder)
    if tokenizer_dir is None:
        docs = list(
            iter_documents(resolve_source({"path": "data/az/train/*.txt", "max_bytes_per_file": 8000}, FIXTURES))
        )
        tokenizer_dir = train_tokenizer(
            docs, folder.parent / f"{folder.name}-sp", vocab_size=512, model_type="unigram", seed=seed, num_threads=1
        )
    if (Path(tokenizer_dir) / "tokenizer_config.json").is_file():
        tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    else:  # bare GPT-2 files (vocab.json + merges.txt)
        from transformers import GPT2TokenizerFast

        tok = GPT2TokenizerFast.from_pretrained(str(tokenizer_dir))
    model = build_model(model_config("tiny", len(tok), **copy.deepcopy(TINY_MODEL)), seed=seed)
    model.save_pretrained(str(folder), safe_serialization=True)
    tok.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory) -> Path:
    """A tiny base with azllm's own SentencePiece tokenizer (has a pad token, no chat template), built once per test
    session (every module that uses it gets the same folder; nothing writes into it)."""
    folder = tmp_path_factory.getbasetemp() / "sft-tiny-base" / "base"
    if (folder / "config.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    return make_base(folder)


def fixture_conversations() -> list[dict]:
    """The fixture instruction data as cleaned conversations (native pairs + translated Alpaca rows)."""
    from azllm.data import resolve_source
    from azllm.sft.clean import clean_conversations
    from azllm.sft.data import read_conversations

    convs = []
    for name in ("native_train", "alpaca_az_mt"):
        c, _ = read_conversations(
            resolve_source({"path": str(SFT_DIR / f"{name}.jsonl")}, None), source=name, placeholders=["Yox"]
        )
        convs += c
    return clean_conversations(convs)[0]


@pytest.fixture(scope="module")
def conversations() -> list[dict]:
    """:func:`fixture_conversations`."""
    return fixture_conversations()


TINY_SPEC = dict(
    max_steps=8,
    batch_size=2,
    lr=3e-3,
    warmup_steps=1,
    eval_steps=4,
    logging_steps=1,
    untimed_steps=1,
    max_length=128,
    eval_batch_size=4,
    save_total_limit=3,
    seed=1234,
)


def tiny_spec(**kw):
    """The SFT spec of the config's defaults with :data:`TINY_SPEC` and ``kw`` laid over it."""
    from config_helpers import default_spec

    return default_spec("sft", **{**TINY_SPEC, **kw})


def params(base, art: Path, **s):
    """A tiny SFT config on the fixture data root, artifacts under ``art``."""
    os.environ["AZLLM_ARTIFACTS"] = str(art)
    sect = {
        "base": str(base),
        "holdout_size": 5,
        "max_length": 256,
        "max_steps": 4,
        "eval_steps": 2,
        "batch_size": 2,
        "logging_steps": 1,
        "untimed_steps": 1,
        "lr": 3e-3,
        "warmup_steps": 1,
        "max_new_tokens": 8,
        **s,
    }
    return load_params(
        None,
        overrides={
            "run_name": "sft-t",
            "data": {"root": str(FIXTURES)},
            "model": {"lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
            "sft": sect,
        },
    )


def prefer_params(tmp_path: Path, base: Path, *, sft: dict | None = None, preference: dict | None = None) -> Path:
    """A tiny preference-tuning params file (``base`` is the SFT model; the fixture's native and translated
    instruction data), written to ``tmp_path/p.yaml``; ``sft`` / ``preference`` lay settings over its sections."""
    import yaml

    params = {
        "run_name": "prefer",
        "data": {"root": str(FIXTURES), "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt"}}},
        "sft": {
            "sources": {
                "native": {"path": str(SFT_DIR / "native_train.jsonl"), "origin": "native"},
                "alpaca_mt": {"path": str(SFT_DIR / "alpaca_az_mt.jsonl"), "origin": "translated"},
            },
            "holdout_size": 4,
            "max_new_tokens": 12,
            "max_length": 256,
            **(sft or {}),
        },
        "model": {"lora": {"r": 4, "alpha": 8}},
        "preference": {
            "base": str(base),
            "build_prompts": 8,
            "held_out_pairs": 4,
            "max_steps": 4,
            "eval_steps": 2,
            "batch_size": 2,
            "max_length": 256,
            **(preference or {}),
        },
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(params))
    return path
