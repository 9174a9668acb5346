"""A memory model of one training step, component by component, and a fit planner built on it.

:func:`predict_memory` takes a Llama config (a ``transformers.LlamaConfig`` or any object/dict with its fields), a
:class:`Variant` (dtype, gradient checkpointing, Liger kernels, LoRA, 4/8-bit base, optimizer) and a batch shape, and
returns the bytes of each part of the peak that training adds on top of the process baseline:

- ``weights``: every parameter at its dtype; a 4-bit NF4 base stores 0.5 byte per weight of the linear layers plus
  its block scales (blocksize 64; with double quantization one uint8 per block and one fp32 per 256 blocks); an
  8-bit base 1 byte per weight plus one fp32 scale per output row. Embeddings, norms and an untied ``lm_head`` are
  never quantized, and stay in the compute dtype unless ``kbit_fp32_rest`` (``model.quant.kbit_fp32_rest``: peft's
  ``prepare_model_for_kbit_training`` casts them to fp32; :func:`azllm.lora.prepare_kbit`).
  LoRA adapters are fp32 (peft's ``autocast_adapter_dtype``).
- ``grads``: one gradient per trainable parameter, at the parameter's dtype.
- ``optimizer``: AdamW keeps two states per trainable parameter at the parameter's dtype; bitsandbytes' 8-bit AdamW
  keeps two uint8 states plus one fp32 absmax per 256-element block, and falls back to 32-bit states for tensors
  under 4096 elements (its ``min_8bit_size``). The paged variant has the same footprint (it only pages on pressure).
- ``activations``: the tensors autograd saves for backward, counted op by op for the Hugging Face Llama
  (see :func:`layer_activation_bytes`), or with checkpointing the input of every layer plus one layer recomputed.
- ``logits``: the loss head. Plain HF materializes B×T×V logits, upcasts them to fp32, saves the fp32 log-softmax,
  and in backward holds the log-softmax, its incoming gradient and the logits' gradient at once: 12 bytes per
  logit at the peak (plus the compute-dtype logits in the forward). Liger's fused linear cross-entropy never
  materializes them: it keeps one chunk of logits and computes the input and weight gradients in the forward.

The peak of a step is ``weights + optimizer + max(activations + logits, grads + optimizer-step temporaries)``:
gradients of the previous step are freed before the forward (``zero_grad(set_to_none=True)``), the saved
activations are at their largest when the loss's backward starts, and by the time all gradients exist the
activations are gone. Numbers are bytes; ``GB`` is 10**9 bytes, ``GiB`` 2**30.

>>> cfg = dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
...            num_key_value_heads=2, vocab_size=1000, tie_word_embeddings=True)
>>> parameter_count(cfg)["total"]
154944
>>> m = predict_memory(cfg, "baseline", batch=2, seq=32)
>>> m["weights"], m["grads"], m["optimizer"]
(619776, 619776, 1239552)
>>> m["logits"] == 12 * 2 * 32 * 1000
True
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from .utils import LIGER_KERNELS, OPTIMIZERS

__all__ = [
    "Variant",
    "parse_variant",
    "shape_of",
    "parameter_count",
    "layer_activation_bytes",
    "predict_memory",
    "max_batch",
    "fit_plan",
    "checkpoint_bytes",
    "cost_per_billion_tokens",
    "job_cost",
    "DTYPE_BYTES",
    "GB",
    "GiB",
    "act_bytes",
]

GB = 10**9
GiB = 2**30
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
_BNB_MIN_8BIT_SIZE = 4096
_BNB_OPT_BLOCK = 256
_NF4_BLOCK = 64


@dataclass(frozen=True)
class Variant:
    """One training technique combination. Build it from a name with :func:`parse_variant`.

    >>> parse_variant("qlora+ckpt").quant, parse_variant("qlora+ckpt").grad_ckpt
    (4, True)
    """

    name: str = "baseline"
    dtype: str = "fp32"  # weights and compute dtype ("fp32" | "bf16"); for a k-bit base: the compute dtype
    grad_ckpt: bool = False
    liger: tuple[str, ...] = ()
    lora: bool = False
    quant: int = 0  # 0 | 4 | 8: bits of the frozen base (implies lora)
    optimizer: str = "adamw"
    lora_r: int = 16
    lora_dropout: float = 0.05
    double_quant: bool = True
    kbit_fp32_rest: bool = False  # a k-bit base's non-quantized params cast to fp32 (azllm.lora.prepare_kbit)

    def to_dict(self) -> dict:
        return asdict(self)


# name token -> changes; a variant name is tokens joined by "+", e.g. "lora+ckpt+bf16"
_TOKENS: dict[str, dict] = {
    "baseline": {},
    "ckpt": {"grad_ckpt": True},
    "bf16": {"dtype": "bf16"},
    "fp32": {"dtype": "fp32"},
    "liger": {"liger": LIGER_KERNELS[:4]},  # all kernels: fused linear CE supersedes plain CE
    **{f"liger_{k}": {"liger": (k,)} for k in LIGER_KERNELS},
    "liger_flce": {"liger": ("fused_linear_cross_entropy",)},
    "liger_ce": {"liger": ("cross_entropy",)},
    "lora": {"lora": True},
    "qlora": {"lora": True, "quant": 4},
    "qlora4": {"lora": True, "quant": 4},
    "qlora8": {"lora": True, "quant": 8},
    "adamw8": {"optimizer": "adamw_8bit"},
    "adamw_8bit": {"optimizer": "adamw_8bit"},
    "paged8": {"optimizer": "paged_adamw_8bit"},
    "paged_adamw_8bit": {"optimizer": "paged_adamw_8bit"},
    "kbit32": {"kbit_fp32_rest": True},  # a k-bit base prepared as peft's prepare_model_for_kbit_training does
}


def parse_variant(name: str | Variant | dict, **defaults: Any) -> Variant:
    """``"lora+ckpt+bf16"`` -> :class:`Variant`. Tokens: baseline, ckpt, bf16, fp32, liger (all kernels),
    liger_<kernel> (rope, rms_norm, swiglu, flce, ce, ...), lora, qlora (4-bit), qlora8, adamw8, paged8, kbit32 (the
    k-bit base's other parameters in fp32: :func:`azllm.lora.prepare_kbit`).
    ``defaults`` (e.g. ``dtype="bf16", lora_r=8``) apply before the tokens.

    >>> parse_variant("liger_rope+liger_swiglu").liger
    ('rope', 'swiglu')
    >>> parse_variant("bf16", dtype="fp32").dtype
    'bf16'
    """
    if isinstance(name, Variant):
        return replace(name, **defaults) if defaults else name
    if isinstance(name, dict):
        return Variant(**{**defaults, **name})
    v = Variant(name=name, **defaults)
    liger: list[str] = []
    for tok in name.split("+"):
        tok = tok.strip()
        if tok not in _TOKENS:
            raise ValueError(f"unknown variant token {tok!r} in {name!r}; known tokens: {', '.join(sorted(_TOKENS))}")
        ch = dict(_TOKENS[tok])
        liger += [k for k in ch.pop("liger", ()) if k not in liger]
        v = replace(v, **ch)
    if v.dtype not in DTYPE_BYTES:
        raise ValueError(f"variant {name!r}: dtype must be one of {sorted(DTYPE_BYTES)}, got {v.dtype!r}")
    if v.optimizer not in OPTIMIZERS:
        raise ValueError(f"variant {name!r}: optimizer must be one of {OPTIMIZERS}, got {v.optimizer!r}")
    return replace(v, liger=tuple(liger))


def shape_of(config: Any) -> dict:
    """The fields of a Llama config that memory depends on, as a dict (accepts a LlamaConfig or a dict)."""
    get = (
        (lambda k, d=None: config.get(k, d)) if isinstance(config, dict) else (lambda k, d=None: getattr(config, k, d))
    )
    h, nh = int(get("hidden_size")), int(get("num_attention_heads"))
    hd = get("head_dim") or h // nh
    return {
        "hidden": h,
        "intermediate": int(get("intermediate_size")),
        "layers": int(get("num_hidden_layers")),
        "heads": nh,
        "kv_heads": int(get("num_key_value_heads") or nh),
        "head_dim": int(hd),
        "vocab": int(get("vocab_size")),
        "tied": bool(get("tie_word_embeddings", False)),
    }


def _linears(s: dict) -> list[tuple[int, int]]:
    """(in, out) of the seven linear layers of one decoder layer: q, k, v, o, gate, up, down."""
    h, i, q, kv = s["hidden"], s["intermediate"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    return [(h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h)]


def parameter_count(config: Any) -> dict:
    """Parameters by group: ``embed``, ``lm_head`` (0 when tied), ``linear`` (all decoder linears), ``norm``.

    >>> parameter_count(dict(hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
    ...                      vocab_size=10, tie_word_embeddings=False))["linear"]
    640
    """
    s = shape_of(config)
    lin = s["layers"] * sum(a * b for a, b in _linears(s))
    out = {
        "embed": s["vocab"] * s["hidden"],
        "lm_head": 0 if s["tied"] else s["vocab"] * s["hidden"],
        "linear": lin,
        "norm": (2 * s["layers"] + 1) * s["hidden"],
    }
    out["total"] = sum(out.values())
    return out


def _lora_params(s: dict, r: int) -> int:
    return s["layers"] * sum(r * (a + b) for a, b in _linears(s))


def act_bytes(v: Variant) -> int:
    """Bytes per activation element. A k-bit base prepared with ``kbit_fp32_rest`` has fp32 embeddings and norms,
    and bitsandbytes casts each layer's output back to its input's dtype, so the residual stream and everything
    saved around it is fp32 whatever the compute dtype; without it, the compute dtype."""
    return 4 if (v.quant and v.kbit_fp32_rest) else DTYPE_BYTES[v.dtype]


def layer_activation_bytes(config: Any, v: Variant | str, tokens: int, device: str = "cuda") -> int:
    """Bytes autograd saves for backward in one decoder layer, for ``tokens`` = batch × seq tokens.

    Counted op by op on the Hugging Face Llama layer with SDPA attention (d = compute-dtype bytes, h hidden,
    i intermediate, q = heads × head_dim, kv = kv_heads × head_dim), per token:

    - each RMSNorm (2 per layer): the fp32 input (4h) for ``pow``/``mul``, the normalized tensor (d·h) for the weight
      product and the output (d·h) for the next linear's weight gradient. Liger's rms_norm saves only its input
      (d·h) and 1/rms, and its output (d·h). With a frozen norm weight (LoRA) neither the normalized tensor nor, unless
      LoRA dropout is 0, the output is saved;
    - RoPE'd q and k and the v projection (d·(q + 2kv)) and the attention output (d·q) plus its fp32 logsumexp
      (4·heads) for SDPA's flash/efficient backward (no T×T matrix); Liger's rope rotates in place: same count;
    - the SwiGLU MLP: gate, silu(gate), up and their product (4·d·i); Liger's swiglu recomputes silu (3·d·i);
    - LoRA: frozen base linears save nothing (bitsandbytes' 4-bit matmul neither); each adapter saves its dropped
      input (·in), the dropout mask and the rank-r bottleneck (d·r) — dropout 0 saves the input once per distinct
      input tensor. peft keeps adapters in fp32 and casts their input to fp32, so these are 4-byte tensors even in
      a bf16 model. The mask is a bool (1 byte·in) on CUDA (fused ``native_dropout``) but a float noise tensor
      (4 bytes·in) on CPU, where ``dropout`` is computed as ``input * bernoulli_noise``.

    >>> cfg = dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
    ...            num_key_value_heads=2, vocab_size=1000)
    >>> layer_activation_bytes(cfg, "baseline", 1) == 2 * (4*64 + 4*64 + 4*64) + 4*(64+2*32) + 4*64 + 4*4 + 4*4*172
    True
    """
    v = parse_variant(v) if isinstance(v, str) else v
    s = shape_of(config)
    d = act_bytes(v)
    h, i, nh = s["hidden"], s["intermediate"], s["heads"]
    q, kv = nh * s["head_dim"], s["kv_heads"] * s["head_dim"]
    liger_norm = "rms_norm" in v.liger
    frozen = v.lora
    if liger_norm:
        norm = d * h + d * h  # saved input + output (output kept by the next linear / adapter)
        if frozen and v.lora_dropout > 0:
            norm = d * h
    elif frozen:
        norm = 4 * h + (d * h if v.lora_dropout == 0 else 0)
    else:
        norm = 4 * h + d * h + d * h
    attn = d * (q + 2 * kv) + d * q + 4 * nh
    mlp = (3 if "swiglu" in v.liger else 4) * d * i
    if frozen:
        mlp -= d * i  # the product is saved only by down_proj's weight gradient, frozen here
        if v.lora_dropout > 0:
            # adapters are fp32 and peft casts their input to fp32 first: the saved tensors are fp32 whatever d is
            mask = 1 if device.startswith("cuda") else 4
            adapters = sum((4 + mask) * a + 4 * v.lora_r for a, _ in _linears(s))
        else:  # identity dropout: the adapter's input is the tensor the base layer sees, saved once per input
            adapters = 7 * 4 * v.lora_r + d * i  # norm outputs counted above, attention output already saved
        mlp += adapters
    return int(tokens * (2 * norm + attn + mlp))


def predict_memory(config: Any, variant: Variant | str, batch: int, seq: int, *, device: str = "cuda") -> dict:
    """Predicted peak bytes that one training step adds above the process baseline, by component.

    Long because the components are counted one after the other in one place, each against its own comment, so
    that the model reads top to bottom like the module docstring.

    Returns ``weights, grads, optimizer, activations, logits, step_temp`` and ``total`` (the peak), plus
    ``params`` and ``trainable`` counts. ``device`` only changes the optimizer-step temporaries: torch's AdamW is
    multi-tensor (``foreach``) on CUDA, which allocates one temporary the size of all trainable parameters, and
    per-tensor on CPU.
    """
    v = parse_variant(variant) if isinstance(variant, str) else variant
    s = shape_of(config)
    pc = parameter_count(config)
    d = DTYPE_BYTES[v.dtype]
    a = act_bytes(v)
    T = batch * seq
    V, h = s["vocab"], s["hidden"]
    lora_n = _lora_params(s, v.lora_r) if v.lora else 0

    # weights
    rest = pc["embed"] + pc["lm_head"] + pc["norm"]
    if v.quant == 4:
        per = 0.5 + ((1 + 4 / 256) / _NF4_BLOCK if v.double_quant else 4 / _NF4_BLOCK)
        base_lin = pc["linear"] * per
    elif v.quant == 8:
        base_lin = pc["linear"] + 4 * s["layers"] * sum(o for _, o in _linears(s))
    else:
        base_lin = pc["linear"] * d
    rest_b = rest * (4 if (v.quant and v.kbit_fp32_rest) else d)
    weights = base_lin + rest_b + 4 * lora_n

    # trainable parameters and their dtype
    if v.lora:
        trainable, tdt, sizes = (
            lora_n,
            4,
            [v.lora_r * a for a, _ in _linears(s)] + [v.lora_r * b for _, b in _linears(s)],
        )
        sizes = sizes * s["layers"]
    else:
        trainable, tdt = pc["total"], d
        sizes = (
            [a * b for a, b in _linears(s)] * s["layers"]
            + [h] * (2 * s["layers"] + 1)
            + [V * h] * (1 if s["tied"] else 2)
        )
    grads = trainable * tdt
    if v.optimizer == "adamw":
        optimizer = 2 * trainable * tdt
    else:
        optimizer = sum(
            2 * n + 2 * 4 * math.ceil(n / _BNB_OPT_BLOCK) if n >= _BNB_MIN_8BIT_SIZE else 2 * 4 * n for n in sizes
        )
    step_temp = (trainable if device == "cuda" else max(sizes)) * tdt if v.optimizer == "adamw" else 0

    # activations
    layer = layer_activation_bytes(config, v, T, device)
    final_norm = T * ((4 * h) if v.lora else (4 * h + 2 * a * h)) if "rms_norm" not in v.liger else T * 2 * a * h
    if v.grad_ckpt:
        inputs = s["layers"] * T * a * h
        acts_at_loss = inputs + final_norm
        acts_recompute = inputs + layer
    else:
        acts_at_loss = s["layers"] * layer + final_norm
        acts_recompute = 0

    # logits
    if "fused_linear_cross_entropy" in v.liger:
        inc = math.ceil(V / h)
        chunk = min(2 ** math.ceil(math.log2(max(1, math.ceil(T / inc)))), T)
        lm_trainable = not v.lora
        logits = chunk * V * (a + 4) + T * h * a + (V * h * a if lm_trainable else 0)
    elif "cross_entropy" in v.liger:
        logits = T * V * (a + (4 if a != 4 else 0))  # CE gradient written in place of the fp32 logits
    else:
        logits = T * V * max(12, a + (4 if a != 4 else 0) + 4)

    total = weights + optimizer + max(acts_at_loss + logits, acts_recompute, grads + step_temp)
    return {
        "weights": int(weights),
        "grads": int(grads),
        "optimizer": int(optimizer),
        "activations": int(max(acts_at_loss, acts_recompute)),
        "logits": int(logits),
        "step_temp": int(step_temp),
        "total": int(total),
        "params": pc["total"],
        "trainable": int(trainable),
    }


def max_batch(
    config: Any,
    variant: Variant | str,
    seq: int,
    budget_bytes: float,
    *,
    reserve_bytes: float = 0,
    device: str = "cuda",
    limit: int = 1 << 16,
) -> int:
    """Largest batch size whose predicted peak fits ``budget_bytes - reserve_bytes`` at sequence length ``seq``
    (0 if even batch 1 does not fit). Peak memory grows with the batch, so a binary search suffices.

    >>> cfg = dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
    ...            vocab_size=1000)
    >>> b = max_batch(cfg, "baseline", 128, 100e6)
    >>> predict_memory(cfg, "baseline", b, 128)["total"] <= 100e6 < predict_memory(cfg, "baseline", b + 1, 128)["total"]
    True
    """
    avail = budget_bytes - reserve_bytes
    fits = lambda b: predict_memory(config, variant, b, seq, device=device)["total"] <= avail  # noqa: E731
    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def fit_plan(
    config: Any,
    variants: list,
    budgets_gb: list[float],
    seq_lens: list[int],
    *,
    reserve_gb: float = 1.0,
    device: str = "cuda",
) -> list[dict]:
    """For every variant and memory budget, the largest batch at each sequence length (``batch_at_<seq>``) and the
    largest tokens per step (batch × seq). ``reserve_gb`` is kept free for what the model does not count (CUDA
    context, cuBLAS workspace, allocator fragmentation).

    >>> cfg = dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000)
    >>> rows = fit_plan(cfg, ["baseline", "ckpt"], [1], [128, 256], reserve_gb=0)
    >>> [r["variant"] for r in rows], rows[0]["budget_gb"]
    (['baseline', 'ckpt'], 1)
    """
    rows = []
    for name in variants:
        v = parse_variant(name) if isinstance(name, str) else name
        for gb in budgets_gb:
            row: dict = {"variant": v.name, "budget_gb": gb}
            best = (0, 0, 0)
            for seq in seq_lens:
                b = max_batch(config, v, seq, gb * GB, reserve_bytes=reserve_gb * GB, device=device)
                row[f"batch_at_{seq}"] = b
                best = max(best, (b * seq, b, seq))
            row["max_tokens_per_step"], row["at_batch"], row["at_seq"] = best
            rows.append(row)
    return rows


def checkpoint_bytes(predicted: dict, *, adapters: bool, trainable: int | None = None) -> float:
    """Bytes of one training checkpoint from :func:`predict_memory`'s parts: the trainable weights in fp32 (only the
    adapters' for LoRA / QLoRA: ``trainable`` parameters, default ``predicted["trainable"]``) and their optimizer
    states. The one checkpoint-size formula of azllm (the job cost of notebook 04 and ``azllm launch``).

    >>> checkpoint_bytes({"weights": 400, "optimizer": 800, "trainable": 100}, adapters=False)
    1200.0
    >>> checkpoint_bytes({"weights": 400, "optimizer": 80, "trainable": 10}, adapters=True)
    120.0
    """
    n = predicted["trainable"] if trainable is None else trainable
    return float((4 * n if adapters else predicted["weights"]) + predicted["optimizer"])


def cost_per_billion_tokens(tokens_per_s: float, price_per_hour: float) -> float:
    """Dollars (or the price's currency) per 10**9 training tokens at ``tokens_per_s`` on an instance billed
    ``price_per_hour``.

    >>> round(cost_per_billion_tokens(10_000, 3.6), 2)  # 1e9 / 1e4 s = 27.8 h at $3.6/h
    100.0
    """
    if not tokens_per_s or tokens_per_s <= 0:
        return float("nan")
    return price_per_hour * 1e9 / tokens_per_s / 3600


def job_cost(
    *,
    tokens: float,
    tokens_per_s: float,
    instances: int,
    price_per_hour: float,
    spot_price_per_hour: float,
    checkpoint_bytes: float,
    keep_checkpoints: int,
    storage_price_gb_month: float,
) -> dict:
    """What a whole training job costs: ``tokens`` at ``tokens_per_s`` (of the whole job) on ``instances`` billed
    ``price_per_hour`` each (on-demand) or ``spot_price_per_hour`` (spot), plus storing ``keep_checkpoints``
    checkpoints of ``checkpoint_bytes`` for the job's duration (a month = 730 h). GB = 10**9 bytes.

    >>> c = job_cost(tokens=3.6e9, tokens_per_s=1e5, instances=2, price_per_hour=10.0, spot_price_per_hour=3.0,
    ...              checkpoint_bytes=20e9, keep_checkpoints=1, storage_price_gb_month=0.023)
    >>> c["hours"], c["on_demand"], c["spot"], round(c["storage"], 4)
    (10.0, 200.0, 60.0, 0.0063)
    """
    if not tokens_per_s or tokens_per_s <= 0:
        raise ValueError(f"tokens_per_s must be positive, got {tokens_per_s}")
    hours = tokens / tokens_per_s / 3600
    storage = checkpoint_bytes * keep_checkpoints / GB * storage_price_gb_month * hours / 730
    return {
        "hours": hours,
        "instance_hours": hours * instances,
        "on_demand": hours * instances * price_per_hour,
        "spot": hours * instances * spot_price_per_hour,
        "storage": storage,
        "checkpoint_gb": checkpoint_bytes / GB,
        "total_on_demand": hours * instances * price_per_hour + storage,
        "total_spot": hours * instances * spot_price_per_hour + storage,
    }
