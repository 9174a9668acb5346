"""Merge and export: a trained model (full, LoRA or QLoRA, with trained token rows) as one standalone Hugging Face
folder that ``AutoModelForCausalLM`` and ``AutoTokenizer`` load offline, without ``trust_remote_code``.

:func:`merged_model` builds a plain model of the same architecture in the chosen dtype and fills every weight with
what the trained model computes with:

- a LoRA layer: its base weight plus ``B @ A * scaling`` (peft's ``get_delta_weight``);
- a 4-bit or 8-bit base weight (QLoRA): **dequantized first** (bitsandbytes), then the LoRA delta added, in the
  export dtype. Nothing is merged into 4-bit weights (re-quantizing after the merge would lose the update);
- trained token rows (peft ``trainable_token_indices``): the base rows with the trained deltas;
- a ``modules_to_save`` copy (a fully trained embedding or output layer): the trained copy;
- everything else: as it is.

:func:`export_model` saves it with safetensors next to the tokenizer's files. The merged model's logits equal the
adapter model's (tested: within 1e-5 for LoRA in fp32; QLoRA within the dequantization's float rounding).

>>> out = export_model(peft_model, "artifacts/default/tokenizer", "artifacts/default/export")  # doctest: +SKIP
>>> AutoModelForCausalLM.from_pretrained(out)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

from .utils import replace_dir

__all__ = ["merged_model", "export_model", "TOKENIZER_FILES", "copy_tokenizer_files"]

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "sp.model",
    "vocab.json",
    "merges.txt",
)
"""The files that make a tokenizer folder (Hugging Face, SentencePiece, GPT-2 style): what an export or a job's
model folder copies next to the weights."""


def copy_tokenizer_files(src: str | os.PathLike | None, dst: str | os.PathLike) -> list[str]:
    """Copy the :data:`TOKENIZER_FILES` that exist in folder ``src`` into ``dst``; returns their names."""
    if not src:
        return []
    copied = []
    for name in TOKENIZER_FILES:
        if (Path(src) / name).is_file():
            shutil.copy(Path(src) / name, Path(dst) / name)
            copied.append(name)
    return copied


def _dequantized(layer) -> torch.Tensor:
    """The full-precision weight of a linear layer, dequantizing a bitsandbytes 4-bit or 8-bit one."""
    import bitsandbytes as bnb

    w = layer.weight
    if isinstance(layer, bnb.nn.Linear4bit):
        return bnb.functional.dequantize_4bit(w.data, w.quant_state).float()
    if isinstance(layer, bnb.nn.Linear8bitLt):
        return (
            bnb.functional.int8_vectorwise_dequant(w.data, w.SCB).float()
            if hasattr(w, "SCB") and w.SCB is not None
            else w.data.float()
        )
    return w.detach().float()


def _effective(src, pname: str) -> torch.Tensor:
    """What ``src.<pname>`` computes with in the trained model (see the module docstring)."""
    if hasattr(src, "lora_A") and pname in ("weight", "bias"):
        if pname == "bias":
            return src.base_layer.bias.detach().float()
        w = _dequantized(src.base_layer)
        for name in src.active_adapters:
            if name in src.lora_A:
                w = w + src.get_delta_weight(name).float()
        return w
    if hasattr(src, "token_adapter") and pname == "weight":
        return src.token_adapter.get_merged_weights(src.token_adapter.active_adapters).detach().float()
    if hasattr(src, "modules_to_save"):
        return getattr(src.modules_to_save[src.active_adapters[0]], pname).detach().float()
    if pname == "weight" and type(src).__name__ in ("Linear4bit", "Linear8bitLt"):
        return _dequantized(src)
    return getattr(src, pname).detach().float()


@torch.no_grad()
def merged_model(model, dtype: torch.dtype = torch.float32):
    """A plain ``transformers`` model (no peft, no quantization) with every weight of ``model`` merged in ``dtype``.

    ``model``: a ``PeftModel`` (LoRA / QLoRA, trainable token rows, modules to save) or a plain model.
    """
    from transformers import AutoModelForCausalLM

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = base.config.__class__.from_dict(
        {k: v for k, v in base.config.to_dict().items() if k != "quantization_config"}
    )
    target = AutoModelForCausalLM.from_config(config, dtype=dtype)
    for mod_name, module in target.named_modules():
        params = dict(module.named_parameters(recurse=False))
        if not params:
            continue
        src = base.get_submodule(mod_name)
        for pname, p in params.items():
            p.copy_(_effective(src, pname).to(dtype))
    if getattr(config, "tie_word_embeddings", False):
        target.tie_weights()
    return target.eval()


def export_model(
    model, tokenizer_dir: str | os.PathLike, out_dir: str | os.PathLike, *, dtype: torch.dtype = torch.float32
) -> Path:
    """Merge ``model`` (:func:`merged_model`) and write a standalone folder: ``model.safetensors`` + ``config.json``
    + the tokenizer's files from ``tokenizer_dir``. Written to a temporary folder, then renamed."""
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    merged_model(model, dtype).save_pretrained(str(tmp), safe_serialization=True)
    copy_tokenizer_files(tokenizer_dir, tmp)
    return replace_dir(tmp, out_dir)
