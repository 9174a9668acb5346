"""One YAML file holds every parameter of a run (``params/*.yaml``).

:func:`load_params` reads a params file, lays it over :data:`DEFAULTS` and rejects any key that is not in the
schema, naming the key, where it is and the keys that are allowed there. A params file therefore only needs the
values it changes. Maps whose keys are chosen by the user (eval sets, baselines, benchmark variants) are written
in :data:`DEFAULTS` as ``{"*": <schema of one entry>}``.

Secrets never go into params: a hub token comes from the ``HF_TOKEN`` environment variable (huggingface_hub
reads it), and :func:`load_params` refuses keys that look like secrets.

>>> p = load_params(None, overrides={"run_name": "demo", "seed": 7})
>>> p["run_name"], p["seed"], p["tokenizer"]["vocab_size"]
('demo', 7, 32000)
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

__all__ = ["DEFAULTS", "ParamsError", "load_params", "deep_update", "params_hash", "data_root", "artifacts_dir"]

DATA_ROOT_ENV = "AZLLM_DATA_ROOT"
ARTIFACTS_ENV = "AZLLM_ARTIFACTS"

# One data source: a local path (glob, relative to the data root unless absolute) and/or a hub dataset.
# The local path is used when it matches files; otherwise the hub dataset is streamed.
SOURCE: dict[str, Any] = {
    "path": None,  # e.g. "data/az/train/*.txt" (txt: one document per line; .jsonl/.parquet: `text_field`)
    "hub": None,  # e.g. "wikimedia/wikipedia"
    "config": None,  # hub config name, e.g. "20231101.az"
    "split": "train",
    "text_field": "text",
    "max_bytes": None,  # stop after this many UTF-8 bytes of text (whole source)
    "max_bytes_per_file": None,  # local files only: cap each file, to rebalance genres
    "max_lines": None,  # stop after this many documents
}

DEFAULTS: dict[str, Any] = {
    "run_name": "default",
    "seed": 1234,
    # notebooks to execute, in order, from notebooks/
    "notebooks": ["01_tokenizers"],
    "data": {
        "root": None,  # data root; default: $AZLLM_DATA_ROOT
        "train": copy.deepcopy(SOURCE),
        "eval": {"*": copy.deepcopy(SOURCE)},
        # line-parallel pairs for parity: {name: {az: SOURCE, en: SOURCE}}
        "parallel": {"*": {"az": copy.deepcopy(SOURCE), "en": copy.deepcopy(SOURCE)}},
    },
    "tokenizer": {
        # the main tokenizer of the run (used by the token files and the model)
        "model_type": "unigram",  # unigram | bpe
        "vocab_size": 32000,
        "character_coverage": 0.9999,
        "byte_fallback": True,
        "split_digits": False,
        "max_piece_length": 16,
        "affix_presplit": False,
        "split_by_whitespace": True,
        "input_sentence_size": 0,  # 0: all sentences
        "num_threads": 2,
        # cap each training file at this many bytes when training tokenizers (rebalances genres; None: all)
        "max_bytes_per_file": None,
        # the sweep of the tokenizer report: every combination is trained
        "sweep": {
            "vocab_sizes": [8000, 16000, 32000, 64000],
            "model_types": ["unigram", "bpe"],
            "affix_presplit": [False, True],
            # the report's "best" tokenizer is chosen at this vocabulary size (None: tokenizer.vocab_size)
            "select_vocab_size": None,
        },
    },
    # baseline tokenizers: {name: {path, hub, tiktoken}}; path is relative to the data root unless absolute
    "baselines": {"*": {"path": None, "hub": None, "tiktoken": None}},
    "report": {
        "show_code": False,
        "long_words": ["evlərimizdən", "Azərbaycanlılaşdıra bilmədiklərimizdənsinizmi"],
        "segment_examples": 8,
    },
    # --- owned by the token-file issue (#3)
    "tokens": {
        "tokenizer": None,  # None: the run's main tokenizer (options above); or a spec for load_tokenizer
        "dir": None,  # None: artifacts/<run_name>/tokens
        "val_fraction": 0.01,  # share of documents (by a hash of their text) in val.bin
        "split_seed": 0,  # key of that hash: keep it fixed to compare runs on the same split
        "num_workers": None,  # encoding threads; None: all cores
        "chunk_docs": 1024,  # documents per chunk (memory stays flat at ~2 * num_workers chunks)
        "benchmark": {
            "quick": False,  # small slice, one round: for tests and the tiny report
            "max_bytes_per_file": None,  # cap each corpus file (None: data.train as it is)
            "scale": 10,  # the large corpus is the corpus repeated `scale` times, streamed
            "repeats": 3,  # rounds of every variant; the table shows medians
            "batch_size": 8,  # get_batch and the training step of the tiny Llama
            "block_size": 256,
        },
    },
    # --- owned by the training issue (#4)
    "model": {
        "preset": "tiny",  # tiny | 125m | 1b (see azllm.model.PRESETS)
        "config": {},  # LlamaConfig fields laid over the preset, e.g. {num_hidden_layers: 2}
        "base": None,  # a pretrained base (folder or hub id): fine-tune it with the run's tokenizer swapped in
        "base_tokenizer": None,  # the base's tokenizer (default: the base itself)
        "swap_init": "mean",  # mean (of the base pieces' embeddings) | random
        "dtype": "float32",  # weights dtype: float32 | bfloat16 | float16 (mixed precision: train.precision)
        "liger": {"rope": False, "rms_norm": False, "swiglu": False, "fused_linear_cross_entropy": False,
                  "cross_entropy": False},
        "lora": {"r": 16, "alpha": 32, "dropout": 0.05, "use_rslora": False,
                 "target_modules": None},  # None: all linear layers but lm_head; or a list of module names
        "quant": {"bits": 4, "quant_type": "nf4", "double_quant": True, "compute_dtype": "bfloat16"},  # QLoRA
    },
    "train": {
        "method": "full",  # full (all weights) | lora | qlora
        "block_size": 128,
        "batch_size": 16,  # per device
        "grad_accum": 1,
        "max_steps": 300,
        "lr": 3e-3,
        "min_lr_ratio": 0.1,  # cosine decays to lr * min_lr_ratio
        "warmup_steps": 20,
        "weight_decay": 0.1,
        "betas": [0.9, 0.95],
        "grad_clip": 1.0,
        "optimizer": "adamw",  # adamw | adamw_8bit | paged_adamw_8bit
        "precision": "auto",  # auto (bf16 on GPUs that have it, else fp16 on GPU, fp32 on CPU) | fp32 | bf16 | fp16
        "gradient_checkpointing": False,
        "eval_steps": 50,
        "eval_max_tokens": 32768,  # per eval set and evaluation (None: the whole set)
        "eval_batch_size": 16,
        "dev_sets": None,  # names from data.eval to evaluate besides val (None: all of them)
        "logging_steps": 10,
        "save_steps": 100,
        "save_total_limit": 2,
        "resume": True,  # resume from the last complete checkpoint of the same run
        "timing_warmup_steps": 5,  # steps left out of tokens/s
        "compare": [],  # methods trained after the main run for the comparison table, e.g. [lora, qlora]
        "compare_steps": 60,  # steps of each comparison run (they start from the main run's model)
        "compare_lr": 1e-3,
        "generate": {
            "prompts": ["Azərbaycan", "Bakı şəhəri", "Bu gün hava", "Təhsil sistemində"],
            "max_new_tokens": 40,
            "temperature": 0.8,
            "top_k": 50,
        },
    },
    # --- owned by the benchmark issue (#5)
    "benchmark": {
        # model shape: a preset of azllm.model (tiny | 125m | 1b) with config overrides, e.g. {hidden_size: 256}
        "preset": "tiny",
        "model": {},
        "vocab_size": 8000,  # None: tokenizer.vocab_size
        "data": "corpus",  # corpus (data.train, tokenized with a vocab_size tokenizer) | synthetic (Zipf ids)
        "corpus_bytes": 2_000_000,
        "dtype": "fp32",  # default dtype of every variant (a variant name with "bf16" overrides it)
        "seq_len": 256,
        "batch_size": 4,
        "warmup_steps": 1,  # not timed (the first step allocates optimizer states; code paths are warmed before)
        "steps": 2,  # steps per timed window
        "repeats": 2,  # timed windows per process
        "rounds": 2,  # fresh processes per variant, run round-robin; medians and min-max pool all windows
        "lr": 3e-4,
        "device": "auto",  # auto | cpu | cuda
        # torch threads in each child (0: torch's default). 1 by default: on a shared machine, OpenMP threads that
        # spin for cores others hold made single steps up to ~25x slower (measured here); a GPU run is unaffected
        "threads": 1,
        "timeout_s": 600,  # per variant
        "mem_cap_mb": None,  # cap on memory above the baseline for every variant (simulates a smaller machine)
        "lora": {"r": 16, "alpha": 32, "dropout": 0.05},
        # variant names: tokens joined by "+" (see azllm.memory.parse_variant), each run in its own process
        "variants": ["baseline", "ckpt", "bf16", "adamw8", "lora", "lora+ckpt", "qlora", "liger", "liger_rope",
                     "liger_rms_norm", "liger_swiglu", "liger_flce"],
        # run one variant under a memory cap at growing batches until OOM ({} or variant None: skip)
        "oom_probe": {"variant": "baseline", "cap_mb": 400, "batches": [8, 16, 32]},
        "price_per_hour": 3.5,  # instance price for the cost table (currency of your choice)
        "price_label": "1x H100 80GB on-demand (example price; set yours)",
        # fit planner: largest batch x seq per memory budget, for presets and user configs ({name: {preset, ...}})
        "fit": {
            "presets": ["1b"],
            "configs": {"*": {}},
            "vocab_size": None,  # None: tokenizer.vocab_size
            "dtype": "bf16",
            "variants": ["baseline", "ckpt", "liger", "liger+ckpt", "lora", "lora+ckpt", "qlora", "qlora+ckpt",
                         "adamw8+ckpt"],
            "budgets_gb": [24, 40, 80, 141],
            "seq_lens": [512, 1024, 2048, 4096, 8192],
            "reserve_gb": 1.0,  # CUDA context, cuBLAS workspace, fragmentation: not in the model
        },
    },
}

_SECRET_KEYS = {"token", "hf_token", "hub_token", "use_auth_token", "auth_token", "api_key", "apikey", "password",
                "secret", "access_token", "wandb_api_key"}
_SECRET_VALUE = re.compile(r"^(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,})$")


class ParamsError(ValueError):
    """A params file is malformed: an unknown key, a wrong type, a secret."""


def _merge(defaults: Any, given: Any, where: str) -> Any:
    if isinstance(defaults, dict) and given is _MISSING:
        given = None
    if isinstance(defaults, dict) and set(defaults) == {"*"}:
        if given is None:
            return {}
        if not isinstance(given, dict):
            raise ParamsError(f"{where}: expected a mapping of name -> entry, got {type(given).__name__}")
        return {k: _merge(defaults["*"], v, f"{where}.{k}") for k, v in given.items()}
    if isinstance(defaults, dict) and defaults:
        if given is None:
            given = {}
        if not isinstance(given, dict):
            raise ParamsError(f"{where}: expected a mapping, got {type(given).__name__}: {given!r}")
        unknown = sorted(set(given) - set(defaults))
        if unknown:
            raise ParamsError(
                f"unknown params key {where + '.' if where else ''}{unknown[0]!s}; "
                f"allowed keys{' in ' + where if where else ''}: {', '.join(sorted(defaults))}"
            )
        return {k: _merge(defaults[k], given.get(k, _MISSING), f"{where}.{k}" if where else k) for k in defaults}
    if given is _MISSING:
        return copy.deepcopy(defaults)
    if isinstance(defaults, dict) and not defaults:  # free-form section not yet specified
        return copy.deepcopy(given) if given is not None else {}
    _check_type(defaults, given, where)
    return copy.deepcopy(given)


class _Missing:
    pass


_MISSING = _Missing()


def _check_type(default: Any, value: Any, where: str) -> None:
    if default is None or value is None:
        return
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(default, str):
        ok = isinstance(value, str)
    elif isinstance(default, list):
        ok = isinstance(value, list)
    else:
        ok = True
    if not ok:
        raise ParamsError(f"{where}: expected {type(default).__name__}, got {type(value).__name__}: {value!r}")


def _check_secrets(obj: Any, where: str = "") -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if str(k).lower() in _SECRET_KEYS or (isinstance(v, str) and _SECRET_VALUE.match(v)):
                raise ParamsError(
                    f"{where + '.' if where else ''}{k}: looks like a secret. Never put tokens or passwords in "
                    "params (they end up in reports); set HF_TOKEN in the environment instead."
                )
            _check_secrets(v, f"{where}.{k}" if where else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_secrets(v, f"{where}[{i}]")
    elif isinstance(obj, str) and _SECRET_VALUE.match(obj):
        raise ParamsError(f"{where}: looks like a hub or API token; never put secrets in params")


def load_params(path: str | os.PathLike | None, overrides: dict | None = None) -> dict:
    """Read a params YAML, validate it against :data:`DEFAULTS` and return plain nested dicts.

    ``overrides`` (a dict of the same shape) is laid over the file, for tests and notebooks.
    """
    given: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ParamsError(f"params file not found: {path}")
        try:
            given = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise ParamsError(f"{path}: not valid YAML: {e}") from e
        if not isinstance(given, dict):
            raise ParamsError(f"{path}: the top level must be a mapping")
    if overrides:
        given = deep_update(copy.deepcopy(given), overrides)
    _check_secrets(given)
    return _merge(DEFAULTS, given, "")


def deep_update(base: dict, upd: dict) -> dict:
    """Lay ``upd`` over ``base`` in place, recursing into dicts present in both; returns ``base``."""
    for k, v in upd.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            deep_update(base[k], v)
        else:
            base[k] = v
    return base


def params_hash(params: dict) -> str:
    """sha256 (first 16 hex digits) of the canonical JSON of the params: equal params, equal hash.

    >>> params_hash({"a": 1, "b": [1, 2]}) == params_hash({"b": [1, 2], "a": 1})
    True
    """
    blob = json.dumps(params, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def data_root(params: dict | None = None) -> Path | None:
    """The data root: ``params['data']['root']``, else ``$AZLLM_DATA_ROOT``, else None (hub sources only)."""
    root = (params or {}).get("data", {}).get("root") or os.environ.get(DATA_ROOT_ENV)
    return Path(root).expanduser().resolve() if root else None


def artifacts_dir(params: dict | None = None) -> Path:
    """Where heavy artifacts go (tokenizers, token files, checkpoints): ``$AZLLM_ARTIFACTS`` or ``./artifacts``,
    in a sub-folder per run name. Git ignores ``artifacts/``."""
    base = Path(os.environ.get(ARTIFACTS_ENV, "artifacts"))
    name = (params or {}).get("run_name", "default")
    return (base / name).resolve()
