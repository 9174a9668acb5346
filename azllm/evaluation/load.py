"""The model a score is for: an exported folder, a training run's final folder or checkpoint, or a hub id, with
the tokenizer it was trained with.

- a folder with ``config.json`` and weights (an :func:`azllm.export.export_model` folder, a full fine-tuning
  checkpoint ``checkpoint-N`` or ``final``): loaded with ``AutoModelForCausalLM``;
- a folder with ``adapter_config.json`` (a LoRA checkpoint): the adapter on its base (peft's
  ``AutoPeftModelForCausalLM``); a run whose vocabulary changed (extend / swap) is scored through its merged export;
- anything else is a hub id (``meta-llama/Llama-3.2-1B``; a gated one needs ``HF_TOKEN``).

The tokenizer: ``tokenizer`` when given, else the folder's own tokenizer files, else the one the run recorded
(``azllm_model.json`` in the folder, or ``azllm_run.json`` in the run folder above a checkpoint).

>>> model, tok, info = load_model("artifacts/default/adapt/extend-lora-export")  # doctest: +SKIP
>>> info["kind"]  # doctest: +SKIP
'folder'
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .harness import EvalModelError

__all__ = ["load_model", "run_tokenizer_path"]

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


def run_tokenizer_path(folder: str | os.PathLike) -> str | None:
    """The tokenizer folder a model folder or checkpoint was trained with: its own files, else what the run
    recorded (``azllm_model.json`` here, ``azllm_run.json`` in the run folder above), else None."""
    folder = Path(folder)
    if any((folder / f).is_file() for f in _TOKENIZER_FILES):
        return str(folder)
    for meta in (folder / "azllm_model.json", folder / "azllm_run.json", folder.parent / "azllm_run.json"):
        if meta.is_file():
            path = json.loads(meta.read_text()).get("tokenizer_path")
            if path:
                return path
    return None


def _offline_error(spec: str, e: Exception) -> EvalModelError:
    return EvalModelError(
        f"{spec!r} is not a local folder, and loading it as a Hugging Face Hub id failed ({type(e).__name__}: "
        f"{str(e).splitlines()[0] if str(e) else ''}). The hub is not reachable from here, or the id is wrong or "
        "gated: give a local folder (an export, a run's final/ or checkpoint-N/), or set HF_TOKEN for a gated "
        "model on a machine that reaches huggingface.co (HF_HUB_OFFLINE=1 uses the local cache only)"
    )


def load_model(spec: str | os.PathLike, *, tokenizer: str | os.PathLike | None = None, dtype=None) -> tuple:
    """``(model, tokenizer, info)`` for a folder or hub id (see the module docstring); ``info``: ``{"spec",
    "kind", "tokenizer"}``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = dtype or torch.float32
    p = Path(os.path.expanduser(str(spec)))
    if p.exists():
        if not p.is_dir():
            raise EvalModelError(f"{p}: a model is a folder (config.json + weights, or a LoRA adapter), not a file")
        if not ((p / "adapter_config.json").is_file() or (p / "config.json").is_file()):
            raise EvalModelError(f"{p}: neither config.json nor adapter_config.json here: not a model folder")
        tok_path = tokenizer or run_tokenizer_path(p)
        if tok_path is None:
            raise EvalModelError(
                f"{p}: no tokenizer files here and no run record names one; pass the tokenizer "
                "folder (azllm eval ... --tokenizer PATH)"
            )
        if (p / "adapter_config.json").is_file():
            from peft import AutoPeftModelForCausalLM

            try:
                model = AutoPeftModelForCausalLM.from_pretrained(str(p), dtype=dtype)
            except Exception as e:  # noqa: BLE001 - a changed vocabulary, a missing base
                raise EvalModelError(
                    f"{p}: cannot put this LoRA adapter on its base ({type(e).__name__}: {e}); "
                    "a run whose vocabulary changed is scored through its merged export "
                    "(azllm.export.export_model)"
                ) from e
            kind = "adapter"
        else:
            model = AutoModelForCausalLM.from_pretrained(str(p), dtype=dtype, trust_remote_code=False)
            kind = "folder"
        tok = AutoTokenizer.from_pretrained(str(tok_path), local_files_only=True)
        return model.eval(), tok, {"spec": str(p), "kind": kind, "tokenizer": str(tok_path)}
    s = str(spec)
    if s.startswith(("/", "./", "../", "~")) or s.count("/") > 1:
        raise EvalModelError(f"{s}: no such model folder")
    try:
        tok = AutoTokenizer.from_pretrained(str(tokenizer) if tokenizer else s)
        model = AutoModelForCausalLM.from_pretrained(s, dtype=dtype, trust_remote_code=False)
    except (OSError, ValueError) as e:
        raise _offline_error(s, e) from e
    return model.eval(), tok, {"spec": s, "kind": "hub", "tokenizer": str(tokenizer) if tokenizer else s}
