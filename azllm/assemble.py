"""The one model assembly: what a training run trains, a benchmark variant measures and an adaptation fits.

:func:`assemble_model` turns a :class:`ModelSpec` (plain fields, no config) into a model, always in this order:

1. **weights**: a random Llama of ``preset`` + ``config`` (:func:`azllm.model.build_model`, seeded), or a
   pretrained ``base`` fitted to the run's tokenizer (:func:`fit_base`: kept as it is, its vocabulary extended,
   or swapped; :func:`vocab_fit` says which);
2. **quantization** for QLoRA (:func:`azllm.lora.quantize_model`: 4-bit NF4/FP4 or 8-bit; it reloads the model);
3. **Liger** kernels (:func:`azllm.model.apply_liger`) on the instance that trains (after quantization, which
   would drop the patch; before LoRA, which wraps the modules Liger patches);
4. **LoRA** (:func:`azllm.lora.apply_lora`) with the rows of a changed vocabulary trainable
   (:func:`azllm.lora.resolve_new_rows`), re-seeded so the adapters start the same in every process;
5. **gradient checkpointing** (non-reentrant; for LoRA/QLoRA inside step 4, as peft wants it).

Training (:mod:`azllm.recipes.train`), every benchmark variant (:mod:`azllm.bench.training`), the overhead
measurement (:mod:`azllm.bench.overhead`) and the adaptation study call it, so a benchmark measures the model that
training trains (tested: same modules, same trainable parameters, same first-step loss).

>>> from azllm import recipes
>>> from azllm.recipes.train import model_spec
>>> spec = model_spec(recipes.load(None, overrides={"model": {"config": {"num_hidden_layers": 1}}}))
>>> model, info = assemble_model(spec, vocab_size=300)
>>> info["method"], info["source"]
('full', 'random init, preset tiny')
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["ModelSpec", "assemble_model", "fit_base", "vocab_fit", "load_base", "METHODS"]

METHODS = ("full", "lora", "qlora")


@dataclass(frozen=True)
class ModelSpec:
    """Everything that decides the model of a run, in plain values. The fields carry no defaults: each is a params
    key (``model``, ``model.lora`` with the prefix ``lora_``, ``model.quant``, ``train.method``,
    ``train.gradient_checkpointing``, the run's ``seed``), filled by :func:`azllm.recipes.specs.build_spec` (from
    the params in :func:`azllm.recipes.train.model_spec`, or a benchmark variant laid over them); only ``device``,
    which no params key sets, has one.
    """

    method: str
    """full | lora | qlora (:data:`METHODS`)."""
    preset: str
    """Model preset of a random init (:data:`azllm.model.PRESETS`)."""
    config: dict
    """LlamaConfig fields laid over the preset."""
    base: str | None
    """A pretrained base (folder or hub id) instead of a random init."""
    base_tokenizer: str | None
    """The base's tokenizer (None: the one the base's azllm_model.json records, else the base itself)."""
    swap_init: str
    """New embedding rows: ``mean`` of the base pieces' rows, or ``random``."""
    dtype: str
    """Weights dtype (fp32 | bf16 | fp16)."""
    seed: int
    """Seed of the random init and of the LoRA adapters."""
    liger: tuple
    """Liger kernel names (:data:`azllm.utils.LIGER_KERNELS`)."""
    quant_bits: int
    """QLoRA: 4 or 8 bits."""
    quant_type: str
    """QLoRA 4-bit type: nf4 | fp4."""
    double_quant: bool
    """QLoRA: quantize the block scales too."""
    compute_dtype: str
    """QLoRA: dtype of the dequantized matmuls."""
    kbit_fp32_rest: bool
    """QLoRA: the parameters that are not quantized cast to fp32 (:func:`azllm.lora.prepare_kbit`)."""
    lora_r: int
    lora_alpha: int
    lora_dropout: float
    use_rslora: bool
    target_modules: tuple | str | None
    """LoRA targets: None or ``all-linear`` (every linear layer but lm_head), or module names."""
    new_rows: str
    """auto | tokens | full | frozen (:func:`azllm.lora.resolve_new_rows`)."""
    gradient_checkpointing: bool
    device: str | None = None
    """``cuda...``: create the weights on that device (the benchmark); None: on the CPU (the Trainer moves them)."""

    def to_dict(self) -> dict:
        return asdict(self)


def load_base(base: str | os.PathLike, dtype):
    """A pretrained causal LM (folder or hub id) from safetensors, never with remote code; a clear error when it
    cannot be loaded."""
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(
            str(base), dtype=dtype, trust_remote_code=False, use_safetensors=True
        )
    except Exception as e:
        raise ValueError(
            f"could not load base model {str(base)!r} (safetensors, no remote code): {type(e).__name__}: {e}"
        ) from e


def vocab_fit(tokenizer, base_meta: dict) -> str:
    """How a base meets the run's tokenizer: ``same`` (an azllm model trained with this very tokenizer, its
    ``azllm_model.json`` records the fingerprint), ``extend`` (the tokenizer was made by
    :func:`azllm.vocab.extend_tokenizer`: its folder has ``azllm_vocab.json``), else ``swap``.

    >>> from types import SimpleNamespace as NS
    >>> vocab_fit(NS(fingerprint="f", path=None), {"tokenizer": "f"}), vocab_fit(NS(fingerprint="g", path=None), {})
    ('same', 'swap')
    """
    if base_meta.get("tokenizer") == tokenizer.fingerprint:
        return "same"
    if tokenizer.path and (Path(tokenizer.path) / "azllm_vocab.json").is_file():
        return "extend"
    return "swap"


def fit_base(
    base: str | os.PathLike, tokenizer, *, base_tokenizer: str | None = None, init: str = "mean", dtype=None
) -> tuple:
    """A pretrained base fitted to ``tokenizer`` (:func:`vocab_fit`): ``(model, source, new_ids)``.

    ``same``: as it is; ``extend``: base rows kept, new rows initialised (``init``), ``new_ids`` = the appended
    ids; ``swap``: every row new. The base's tokenizer is ``base_tokenizer``, else the one an azllm model records,
    else the base itself.
    """
    from . import model as azmodel

    meta_path = Path(base) / "azllm_model.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    model = load_base(base, dtype)
    how = vocab_fit(tokenizer, meta)
    if how == "same":
        return model, f"azllm model {base}", []
    base_tok = base_tokenizer or meta.get("tokenizer_path") or str(base)
    if how == "extend":
        counts = azmodel.extend_embeddings(model, base_tok, tokenizer, init=init)
        return (
            model,
            f"base {base}, vocabulary extended ({init} init)",
            list(range(counts["kept"], tokenizer.vocab_size)),
        )
    azmodel.swap_tokenizer_embeddings(model, base_tok, tokenizer, init=init)
    return model, f"base {base}, tokenizer swapped ({init} init)", list(range(tokenizer.vocab_size))


def _weights(spec: ModelSpec, tokenizer, vocab_size: int | None, dtype):
    from . import model as azmodel

    if spec.base is not None:
        if tokenizer is None:
            raise ValueError("a base model needs the run's tokenizer to be fitted to")
        return fit_base(spec.base, tokenizer, base_tokenizer=spec.base_tokenizer, init=spec.swap_init, dtype=dtype)
    import torch

    V = int(vocab_size or tokenizer.vocab_size)
    where = torch.device(spec.device) if spec.device and spec.device.startswith("cuda") else contextlib.nullcontext()
    with where:
        model = azmodel.build_model(azmodel.model_config(spec.preset, V, **spec.config), dtype=dtype, seed=spec.seed)
    return model, f"random init, preset {spec.preset}", []


def assemble_model(spec: ModelSpec, tokenizer=None, *, vocab_size: int | None = None) -> tuple:
    """The model of ``spec`` (steps of the module docstring) for ``tokenizer`` (or a bare ``vocab_size`` for a
    random init without one). Returns ``(model, info)`` with ``info = {"method", "liger", "parameters", "source",
    "new_rows"}``; ``info["liger"]["applied"]`` lists the kernels that really run (none without CUDA)."""
    import torch

    from . import lora
    from . import model as azmodel
    from .utils import torch_dtype

    if spec.method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {spec.method!r}")
    model, source, new_ids = _weights(spec, tokenizer, vocab_size, torch_dtype(spec.dtype))
    want = tokenizer.vocab_size if tokenizer is not None else vocab_size
    if want is not None and model.config.vocab_size != want:
        raise ValueError(f"model vocab {model.config.vocab_size} != tokenizer vocab {want}")
    if spec.method == "qlora":
        model = lora.quantize_model(
            model,
            bits=spec.quant_bits,
            double_quant=spec.double_quant,
            quant_type=spec.quant_type,
            compute_dtype=torch_dtype(spec.compute_dtype),
        )
    liger = azmodel.apply_liger(model, list(spec.liger))
    rows = f"{len(new_ids)} new rows: trained with the model" if new_ids else "none"
    if spec.method in ("lora", "qlora"):
        how = lora.resolve_new_rows(spec.new_rows, n_new=len(new_ids), vocab_size=model.config.vocab_size)
        rows = f"{len(new_ids)} new rows: {how}" if new_ids else "none"
        torch.manual_seed(spec.seed)
        targets = spec.target_modules if isinstance(spec.target_modules, str | None) else list(spec.target_modules)
        model = lora.apply_lora(
            model,
            r=spec.lora_r,
            alpha=spec.lora_alpha,
            dropout=spec.lora_dropout,
            use_rslora=spec.use_rslora,
            target_modules=targets or "all-linear",
            kbit=(spec.method == "qlora"),
            kbit_fp32_rest=spec.kbit_fp32_rest,
            gradient_checkpointing=spec.gradient_checkpointing,
            liger_flce="fused_linear_cross_entropy" in liger["applied"],
            new_token_ids=new_ids,
            new_rows=how,
        )
    elif spec.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model, {
        "method": spec.method,
        "liger": liger,
        "parameters": azmodel.count_parameters(model),
        "source": source,
        "new_rows": rows,
    }
