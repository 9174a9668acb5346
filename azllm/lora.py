"""LoRA and QLoRA through peft and bitsandbytes, and the optimizers (AdamW, 8-bit AdamW, paged 8-bit AdamW).

The usual QLoRA recipe, unchanged: :func:`quantize_model` (bitsandbytes NF4 + double quantization + a compute
dtype, or 8-bit, loaded through transformers' own ``BitsAndBytesConfig`` path), then :func:`apply_lora`
(:func:`prepare_kbit` + ``get_peft_model(LoraConfig(...))``), then :func:`make_optimizer`.
All of it runs on CPU (bitsandbytes has a CPU backend) and on CUDA.

**The AVX512-BF16 repack trap** (bitsandbytes >= 0.48 on CPUs with AVX512-BF16, e.g. this machine): the first
forward of a ``Linear4bit`` in eval mode with an input that does not require grad (a ``torch.no_grad()`` eval
pass, or ``generate``) silently *repacks* the layer's 4-bit weight into a CPU-inference layout and replaces its
quant state (absmax cast to bf16, double quantization undone). The training path still reads the weight as if it
were in the original layout, so afterwards LoRA gradients are wrong (some exactly zero), with only a warning,
while the loss still falls. :func:`guard_cpu_4bit_repack` switches that repack off on every ``Linear4bit``
(``support_avx512bf16_for_cpu = False``: the generic dequantize + matmul path is used for inference too, a little
slower on CPU and bit-for-bit the training path). :func:`quantize_model` always applies the guard, and
:func:`check_not_repacked` (called by the training loop before training and after every evaluation) refuses a
model whose weights were already repacked, because the inverse conversion is lossy (bf16 absmax).

Decision: a changed vocabulary trains under LoRA. ``all-linear`` leaves ``embed_tokens`` and ``lm_head`` out, so
:func:`apply_lora` takes the ids of the new rows and makes exactly them trainable (peft's
``trainable_token_indices``) or the whole embedding and output layer (``modules_to_save``), see
:func:`new_rows_config`; :func:`embedding_rows` reads the effective rows back.

Decision: LoRA never targets ``lm_head`` when Liger's fused linear cross-entropy is on (that kernel reads
``lm_head.weight`` directly and would skip the adapter); peft's ``"all-linear"`` already leaves the output layer
out, and an explicit ``lm_head`` target is dropped with a warning.
"""

from __future__ import annotations

import os
import tempfile
import warnings

import torch

from .utils import OPTIMIZERS

__all__ = [
    "resolve_new_rows",
    "quantize_model",
    "guard_cpu_4bit_repack",
    "check_not_repacked",
    "prepare_kbit",
    "apply_lora",
    "new_rows_config",
    "embedding_rows",
    "make_optimizer",
    "QuantError",
]


class QuantError(RuntimeError):
    """A quantized model in a state that would train wrongly."""


def _default_device_map():
    return {"": 0} if torch.cuda.is_available() else {"": "cpu"}


def quantize_model(
    model_or_config, bits: int, *, double_quant: bool, quant_type: str, compute_dtype: torch.dtype, device_map=None
):
    """A bitsandbytes-quantized copy of a model (4-bit NF4/FP4 or 8-bit), ready for QLoRA.

    ``model_or_config``: a ``PreTrainedModel`` (its current weights are quantized, e.g. a randomly initialised
    model), a ``PretrainedConfig`` (randomly initialised first, with the seeded default init) or a folder / hub id
    (loaded directly). Quantization goes through ``from_pretrained(..., quantization_config=BitsAndBytesConfig)``,
    the code path users take with a real base model; an in-memory model is saved to a temporary safetensors folder
    for that. The CPU repack guard is applied (see the module docstring).

    >>> q = quantize_model(build_model(model_config("tiny", 1000), seed=0), bits=4, double_quant=True,
    ...                    quant_type="nf4", compute_dtype=torch.bfloat16)  # doctest: +SKIP
    >>> type(q.model.layers[0].self_attn.q_proj).__name__  # doctest: +SKIP
    'Linear4bit'
    """
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, PretrainedConfig, PreTrainedModel

    if bits == 4:
        if quant_type not in ("nf4", "fp4"):
            raise ValueError(f"quant_type must be 'nf4' or 'fp4', got {quant_type!r}")
        qc = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type=quant_type,
            bnb_4bit_use_double_quant=bool(double_quant),
            bnb_4bit_compute_dtype=compute_dtype,
        )
    elif bits == 8:
        qc = BitsAndBytesConfig(load_in_8bit=True)
    else:
        raise ValueError(f"bits must be 4 or 8, got {bits!r}")
    kw = dict(
        quantization_config=qc,
        device_map=device_map or _default_device_map(),
        trust_remote_code=False,
        use_safetensors=True,
    )
    if isinstance(model_or_config, (str, os.PathLike)):
        model = AutoModelForCausalLM.from_pretrained(str(model_or_config), **kw)
    else:
        if isinstance(model_or_config, PretrainedConfig):
            from transformers import LlamaForCausalLM

            src = LlamaForCausalLM(model_or_config)
        elif isinstance(model_or_config, PreTrainedModel):
            src = model_or_config
        else:
            raise TypeError(f"quantize_model takes a model, a config or a path, got {type(model_or_config).__name__}")
        with tempfile.TemporaryDirectory(prefix="azllm-quant-") as tmp:
            src.save_pretrained(tmp)
            model = type(src).from_pretrained(tmp, **kw)
    guard_cpu_4bit_repack(model)
    return model


def _linear4bit_modules(model):
    import bitsandbytes as bnb

    return [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]


def guard_cpu_4bit_repack(model) -> int:
    """Switch off bitsandbytes' CPU inference repack on every ``Linear4bit`` of ``model``; return how many.

    Raises :class:`QuantError` if a layer was already repacked (see :func:`check_not_repacked`).
    """
    check_not_repacked(model)
    mods = _linear4bit_modules(model)
    for m in mods:
        m.support_avx512bf16_for_cpu = False
    return len(mods)


def check_not_repacked(model) -> None:
    """Raise :class:`QuantError` if any 4-bit weight is in bitsandbytes' CPU inference layout."""
    bad = [
        m
        for m in _linear4bit_modules(model)
        if getattr(getattr(m.weight, "quant_state", None), "packing_format_for_cpu", False)
    ]
    if bad:
        raise QuantError(
            f"{len(bad)} 4-bit layer(s) were repacked by bitsandbytes for CPU inference (an eval/no-grad forward "
            "ran before guard_cpu_4bit_repack). LoRA gradients through them would be wrong. Reload the model with "
            "azllm.lora.quantize_model, which applies the guard, and train/evaluate only after that."
        )


def apply_lora(
    model,
    *,
    r: int,
    alpha: int,
    dropout: float,
    use_rslora: bool = False,
    target_modules="all-linear",
    kbit: bool | None = None,
    kbit_fp32_rest: bool = False,
    gradient_checkpointing: bool = False,
    liger_flce: bool = False,
    new_token_ids: list[int] | None = None,
    new_rows: str = "tokens",
):
    """Wrap ``model`` in a peft ``PeftModel`` with a LoRA adapter (base weights frozen).

    ``target_modules``: ``"all-linear"`` (every linear layer but the output layer) or a list of module names.
    ``kbit``: prepare a k-bit base (:func:`prepare_kbit`, with ``kbit_fp32_rest``); None: when the model is 4/8-bit
    quantized. ``use_rslora``: scale by ``alpha/sqrt(r)`` instead of ``alpha/r``.
    ``liger_flce``: Liger's fused linear cross-entropy was applied to ``model`` (see the module docstring): an
    explicit ``lm_head`` target is then dropped with a warning.

    ``new_token_ids``: ids whose embedding rows are new to the base (a swapped or extended vocabulary). LoRA's
    ``all-linear`` leaves ``embed_tokens`` and ``lm_head`` out, so without this they would keep their
    initialisation forever. ``new_rows`` says how they train (:func:`new_rows_config`): ``"tokens"`` exactly
    those rows (peft's ``trainable_token_indices``, on the input embedding and on an untied output layer; saved with
    the adapter), ``"full"`` the whole embedding and output layer (``modules_to_save``), ``"frozen"`` not at all
    (a loud warning).

    >>> peft_model = apply_lora(build_model(model_config("tiny", 1000)), r=8, alpha=16, dropout=0.0,
    ...                         new_token_ids=list(range(900, 1000)))  # doctest: +SKIP
    >>> peft_model.print_trainable_parameters()  # doctest: +SKIP
    """
    from peft import LoraConfig, get_peft_model

    quantized = bool(getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_loaded_in_8bit", False))
    if kbit is None:
        kbit = quantized
    if not isinstance(target_modules, str):
        target_modules = list(target_modules)
        if liger_flce and "lm_head" in target_modules:
            warnings.warn(
                "LoRA target 'lm_head' DROPPED: Liger's fused linear cross-entropy reads lm_head.weight "
                "directly and would silently ignore an adapter on it",
                stacklevel=2,
            )
            target_modules = [t for t in target_modules if t != "lm_head"]
        if not target_modules:
            raise ValueError("no LoRA target module left")
    rows = new_rows_config(model, new_token_ids, new_rows, liger_flce=liger_flce)
    if kbit:
        model = prepare_kbit(model, fp32_rest=kbit_fp32_rest, gradient_checkpointing=gradient_checkpointing)
    elif gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    cfg = LoraConfig(
        r=int(r),
        lora_alpha=int(alpha),
        lora_dropout=float(dropout),
        use_rslora=bool(use_rslora),
        target_modules=target_modules,
        bias="none",
        task_type="CAUSAL_LM",
        **rows,
    )
    return get_peft_model(model, cfg)


def prepare_kbit(model, *, fp32_rest: bool = False, gradient_checkpointing: bool = False):
    """A k-bit (QLoRA) base made ready for its adapters: the CPU repack guard (:func:`guard_cpu_4bit_repack`), every
    base parameter frozen, and with ``gradient_checkpointing`` non-reentrant checkpointing with input grads on.

    ``fp32_rest``: peft's ``prepare_model_for_kbit_training`` instead, which also casts every parameter that is not
    quantized (norms, embeddings, output layer) to fp32. An fp32 norm weight times a bf16 hidden state is fp32, and
    bitsandbytes returns each layer's output in its input's dtype, so the whole residual stream, and what autograd
    saves of it, is fp32 whatever the compute dtype. The training benchmark at ``params/gpu.yaml``'s shape
    (Llama-3.2-1B, batch 4 x 2048, bf16) on one H200 (torch 2.11, transformers 5.17) measured QLoRA at 11,744
    tokens/s and 74.8 GiB peak with it, 34,677 tokens/s and 34.6 GiB without, the last losses within about 0.01;
    ``azllm bench gpu`` measures both (``qlora`` and ``qlora+kbit32``). Off by default
    (``model.quant.kbit_fp32_rest``), as TRL prepares a k-bit model since its PR 4457 (no norms upcast);
    ``tests/test_lora.py`` checks that the loss keeps on real tokens.

    >>> q = prepare_kbit(quantize_model(model, bits=4), gradient_checkpointing=True)  # doctest: +SKIP
    """
    guard_cpu_4bit_repack(model)
    if fp32_rest:
        from peft import prepare_model_for_kbit_training

        return prepare_model_for_kbit_training(
            model,
            use_gradient_checkpointing=gradient_checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False},
        )
    for p in model.parameters():
        p.requires_grad_(False)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    return model


def _tied(model) -> bool:
    out = model.get_output_embeddings()
    return out is None or out.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def resolve_new_rows(new_rows: str, *, n_new: int, vocab_size: int) -> str:
    """The new-rows mechanism a LoRA run uses: ``new_rows`` as given, except ``auto`` = ``full`` when every row is
    new (a swapped vocabulary: a per-row mask would cost more than the whole matrices) and ``tokens`` otherwise.

    >>> resolve_new_rows("auto", n_new=8000, vocab_size=8000), resolve_new_rows("auto", n_new=10, vocab_size=8000)
    ('full', 'tokens')
    """
    if new_rows != "auto":
        return new_rows
    return "full" if n_new >= vocab_size else "tokens"


def new_rows_config(model, new_token_ids: list[int] | None, new_rows: str, *, liger_flce: bool = False) -> dict:
    """The ``LoraConfig`` fields that make the embedding rows of ``new_token_ids`` trainable (see
    :func:`apply_lora`): ``{}``, ``{"trainable_token_indices": ...}`` or ``{"modules_to_save": [...]}``.

    >>> new_rows_config(None, None, "tokens")
    {}
    """
    if new_rows not in ("tokens", "full", "frozen"):
        raise ValueError(f"new_rows must be 'tokens', 'full' or 'frozen', got {new_rows!r}")
    if not new_token_ids:
        return {}
    if new_rows == "frozen":
        warnings.warn(
            f"{len(new_token_ids)} NEW TOKEN ROWS STAY FROZEN: LoRA does not train embed_tokens or lm_head, "
            "so the new tokens keep their initial rows for the whole run. Use new_rows='tokens' or "
            "'full'.",
            stacklevel=3,
        )
        return {}
    if liger_flce:
        raise ValueError(
            "new token rows under Liger's fused linear cross-entropy: the kernel reads lm_head.weight "
            "directly and would ignore the trained rows; turn fused_linear_cross_entropy off for this "
            "run"
        )
    if new_rows == "full":  # a tied output layer must follow the trained copy of the embedding
        return (
            {"modules_to_save": ["embed_tokens"], "ensure_weight_tying": True}
            if _tied(model)
            else {"modules_to_save": ["embed_tokens", "lm_head"]}
        )
    ids = sorted(int(i) for i in new_token_ids)
    return {"trainable_token_indices": ids if _tied(model) else {"embed_tokens": ids, "lm_head": ids}}


def embedding_rows(model) -> tuple[torch.Tensor, torch.Tensor]:
    """The effective input and output embedding matrices of a model, with any trainable-token deltas or
    modules-to-save copies of a peft wrapper applied (detached copies)."""

    def effective(module) -> torch.Tensor:
        adapter = getattr(module, "token_adapter", None)
        if adapter is not None:
            return adapter.get_merged_weights(adapter.active_adapters).detach().clone()
        if hasattr(module, "modules_to_save"):
            return module.modules_to_save[module.active_adapters[0]].weight.detach().clone()
        return module.weight.detach().clone()

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    inp = effective(base.get_input_embeddings())
    out = base.get_output_embeddings()
    return inp, (inp if out is None else effective(out))


def make_optimizer(
    model, name: str, *, lr: float, weight_decay: float, betas: tuple[float, float], eps: float = 1e-8
) -> torch.optim.Optimizer:
    """An optimizer over the trainable parameters: ``"adamw"`` (torch), ``"adamw_8bit"`` or ``"paged_adamw_8bit"``
    (bitsandbytes; on CPU the paged one falls back to plain 8-bit AdamW, as bitsandbytes warns). Weight decay
    applies to matrices only (>= 2-D: linear and embedding weights), not to norms and biases, as in nanoGPT /
    Llama. bitsandbytes keeps 8-bit state only for tensors of >= 4096 elements.

    >>> opt = make_optimizer(model, "adamw_8bit", lr=1e-3, weight_decay=0.1, betas=(0.9, 0.95))  # doctest: +SKIP
    """
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameter")
    seen, decay, no_decay = set(), [], []
    for p in params:
        if id(p) in seen:
            continue
        seen.add(id(p))
        (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": float(weight_decay)}, {"params": no_decay, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    betas = tuple(float(b) for b in betas)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
    if name in ("adamw_8bit", "paged_adamw_8bit"):
        import bitsandbytes as bnb

        cls = bnb.optim.AdamW8bit if name == "adamw_8bit" else bnb.optim.PagedAdamW8bit
        return cls(groups, lr=lr, betas=betas, eps=eps)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {list(OPTIMIZERS)}")
