"""Llama models for Azerbaijani: size presets, random init, a pretrained base with a tokenizer swap, Liger kernels.

Three ways to get a ``LlamaForCausalLM`` whose vocabulary is the run's tokenizer:

- :func:`model_config` + :func:`build_model`: a preset (``"tiny"``, ``"125m"``, ``"1b"``) or an explicit dict,
  randomly initialised (transformers' own ``_init_weights``, seeded).
- :func:`swap_tokenizer_embeddings` / :func:`extend_embeddings`: a pretrained base (loaded by
  :func:`azllm.assemble.load_base`: safetensors only, never ``trust_remote_code``) whose embeddings are rebuilt
  for a new tokenizer. Each new token's input row (and output
  row, when the embeddings are not tied) is the **mean of the base rows of the pieces the base tokenizer splits the
  token's text into**. Rows of tokens whose text cannot be expressed (SentencePiece byte-fallback pieces with no
  base counterpart) get the mean of all base rows. Special tokens map to the base's own ``bos``/``eos``/``pad`` rows
  when it has them.
- :func:`apply_liger` patches a built model with Liger Kernel's fused Triton kernels, kernel by kernel.

Liger decisions (all documented in :func:`apply_liger`):

- Kernels are applied through Liger's own instance API (``_apply_liger_kernel_to_instance`` ->
  ``apply_liger_kernel_to_llama(model=...)``). Note that Liger's ``rope`` and ``cross_entropy`` patches are
  *process-global* (they replace ``modeling_llama.apply_rotary_pos_emb`` and ``torch.nn.functional.cross_entropy``
  for everything in the process); ``rms_norm``, ``swiglu`` and ``fused_linear_cross_entropy`` only touch the
  instance.
- Without CUDA, Liger's Triton kernels cannot run: :func:`apply_liger` applies nothing, says so loudly (a warning)
  and returns ``available=False`` with the reason, which the training report records. It never crashes and never
  claims a kernel it did not apply. ``TRITON_INTERPRET=1`` (Triton's exact but very slow CPU interpreter) counts
  as available only with ``allow_interpreter=True`` (the parity tests).
- The fused linear cross-entropy (FLCE) computes the loss straight from the hidden states, so **in training mode
  the model returns no logits** (``out.logits is None``); eval mode still returns logits (generation and our
  evaluation run in eval mode). FLCE reads ``lm_head.weight`` directly, so a LoRA adapter on ``lm_head`` would be
  silently ignored: :func:`azllm.lora.apply_lora` therefore never targets ``lm_head`` when FLCE is on (it drops it
  with a warning), and :func:`apply_liger` refuses FLCE on a model that already has a LoRA adapter on ``lm_head``.

ids are int64 everywhere (Liger's kernels require it): the token files return int64 tensors.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
import warnings
from pathlib import Path

import torch

from .utils import LIGER_KERNELS

__all__ = [
    "PRESETS",
    "model_config",
    "build_model",
    "count_parameters",
    "swap_tokenizer_embeddings",
    "extend_embeddings",
    "liger_available",
    "apply_liger",
    "LigerError",
]

log = logging.getLogger(__name__)

# Shapes only: vocab_size always comes from the tokenizer. head_dim = hidden_size / num_attention_heads.
PRESETS: dict[str, dict] = {
    # ~0.8M non-embedding parameters: trains to a clearly falling val loss in a few minutes on 2 CPU cores
    "tiny": dict(
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    ),
    # GPT-3-small / SmolLM-135M-like width and depth (~85M non-embedding + embeddings, ~125M at a 50k vocab)
    "125m": dict(
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=12,
        num_attention_heads=12,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    ),
    # the shape of meta-llama/Llama-3.2-1B (its 128k-context llama3 RoPE scaling included)
    "1b": dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        max_position_embeddings=131072,
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 32.0,
            "high_freq_factor": 4.0,
            "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192,
        },
    ),
}


class LigerError(ValueError):
    """A Liger kernel request that cannot be honoured correctly."""


def model_config(preset: str | dict, vocab_size: int, **overrides):
    """A ``LlamaConfig`` from a preset name or a dict of ``LlamaConfig`` fields, with the tokenizer's vocabulary.

    ``overrides`` replace preset fields (``rope_theta=`` is accepted as a shorthand for the RoPE base).
    Special ids follow our tokenizers (bos=1, eos=2, pad=3) unless overridden.

    >>> cfg = model_config("tiny", vocab_size=4000)
    >>> cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size, cfg.tie_word_embeddings
    (128, 4, 4000, True)
    >>> model_config("1b", 128256).num_key_value_heads
    8
    """
    from transformers import LlamaConfig

    if isinstance(preset, str):
        if preset not in PRESETS:
            raise ValueError(
                f"unknown model preset {preset!r}; choose one of {sorted(PRESETS)} or pass a dict of LlamaConfig fields"
            )
        fields = copy.deepcopy(PRESETS[preset])
    elif isinstance(preset, dict):
        fields = copy.deepcopy(preset)
    else:
        raise TypeError(f"preset must be a preset name or a dict, got {type(preset).__name__}")
    if not isinstance(vocab_size, int) or vocab_size <= 0:
        raise ValueError(f"vocab_size must be a positive int (the tokenizer's vocab_size), got {vocab_size!r}")
    fields.update({k: v for k, v in overrides.items() if v is not None})
    if "rope_theta" in fields:
        theta = float(fields.pop("rope_theta"))
        rp = dict(fields.get("rope_parameters") or {"rope_type": "default"})
        rp["rope_theta"] = theta
        fields["rope_parameters"] = rp
    fields.setdefault("bos_token_id", 1)
    fields.setdefault("eos_token_id", 2)
    fields.setdefault("pad_token_id", 3)
    fields["vocab_size"] = int(vocab_size)
    try:
        return LlamaConfig(**fields)
    except (TypeError, ValueError) as e:
        raise ValueError(f"invalid model config {fields}: {e}") from e


def build_model(config, *, dtype: torch.dtype = torch.float32, seed: int | None = None):
    """A randomly initialised ``LlamaForCausalLM`` (transformers' initialisation: normal(0, initializer_range)).

    The same ``seed`` gives the same weights.

    >>> m = build_model(model_config("tiny", 1000), seed=0)
    >>> count_parameters(m)["total"] > 0
    True
    """
    from transformers import LlamaForCausalLM

    if seed is not None:
        torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    return model.to(dtype)


def count_parameters(model) -> dict:
    """Total, trainable and non-embedding parameter counts (tied weights counted once)."""
    seen, total, trainable = set(), 0, 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    emb = model.get_input_embeddings().weight.numel() if hasattr(model, "get_input_embeddings") else 0
    return {"total": total, "trainable": trainable, "non_embedding": total - emb}


# ------------------------------------------------------------------------------------------ tokenizer swap


def _as_tok(t):
    from .tokenizer import Tok, load_tokenizer

    return t if isinstance(t, Tok) else load_tokenizer(t)


def _hf_vocab(tok) -> dict[str, int] | None:
    from tokenizers import Tokenizer

    if tok.path and (Path(tok.path) / "tokenizer.json").is_file():
        return Tokenizer.from_file(str(Path(tok.path) / "tokenizer.json")).get_vocab(with_added_tokens=True)
    return None


def _token_texts(tok) -> list[str | int | None]:
    """The surface text of every id of a tokenizer: a str, an int for a byte-fallback piece ``<0xNN>`` (the
    byte), or None (specials, undecodable ids).

    SentencePiece's word-boundary mark ``▁`` becomes a space, so ``"▁evlər"`` -> ``" evlər"``.
    """
    out: list[str | int | None] = [None] * tok.vocab_size
    vocab = _hf_vocab(tok)
    if vocab is not None:
        text = _byte_level_text if _is_byte_level(tok) else (lambda p: p.replace("\u2581", " "))
        for piece, i in vocab.items():
            if i >= tok.vocab_size or i in tok.special_ids:
                continue
            if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                out[i] = int(piece[3:5], 16)
            else:
                out[i] = text(piece)
        return out
    for i in range(tok.vocab_size):  # sentencepiece / tiktoken: decode each id alone
        if i in tok.special_ids or i in tok.fallback_ids:
            continue
        try:
            out[i] = tok.decode([i])
        except Exception:  # noqa: BLE001 - undecodable single ids (partial UTF-8) have no text
            out[i] = None
    return out


def _is_byte_level(tok) -> bool:
    import json

    data = json.loads((Path(tok.path) / "tokenizer.json").read_text(encoding="utf-8"))
    return "ByteLevel" in json.dumps(data.get("decoder"))


@functools.cache
def _byte_decoder() -> dict[str, int]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {c: b for b, c in bytes_to_unicode().items()}


def _byte_level_text(piece: str) -> str | None:
    """The text of a byte-level BPE piece (``"Ġbil"`` -> ``" bil"``); None when its bytes are not whole UTF-8."""
    try:
        return bytes(_byte_decoder()[c] for c in piece).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return None


def _base_piece_ids(base_tok, text: str) -> list[int]:
    """The base tokenizer's ids for ``text``; a leading whitespace-only piece is dropped when something follows
    it (a SentencePiece base adds a dummy-prefix ``▁`` even to a word-internal piece such as ``"un"``)."""
    ids = base_tok.encode(text)
    if len(ids) > 1 and base_tok.decode(ids[:1]).strip() == "":
        ids = ids[1:]
    return ids


def _row_sources(text, special: int | None, base_tok, base_vocab: dict, n_base: int) -> tuple[list | None, str]:
    """The base ids whose rows a new row averages, and which kind of row it is (the keys of the swap counts)."""
    if special is not None and special < n_base:
        return [special], "special"
    if isinstance(text, int):  # a byte piece: the base's own byte piece, else the ASCII character
        j = base_vocab.get(f"<0x{text:02X}>")
        ids = (
            [j]
            if j is not None and j < n_base
            else ([j for j in base_tok.encode(chr(text)) if j < n_base] if 32 <= text < 127 else None) or None
        )
        return ids, "byte" if ids else "fallback"
    if text:
        ids = [j for j in _base_piece_ids(base_tok, text) if j < n_base] or None
        return ids, "mean_init" if ids else "fallback"
    return None, "fallback"


@torch.no_grad()
def swap_tokenizer_embeddings(model, base_tokenizer, new_tokenizer, *, init: str = "mean", keep_first: int = 0) -> dict:
    """Resize ``model``'s embeddings to ``new_tokenizer`` and initialise every row (in place).

    ``init="mean"``: row ``i`` = mean of the base rows of ``base_tokenizer.encode(text_i)`` (input and, when not
    tied, output embeddings separately). ``init="random"``: normal rows with the base rows' mean and std (the
    control of the tokenizer-swap test). Byte-fallback pieces ``<0xNN>`` take the base's same byte piece when it
    has one (else the ASCII character's pieces); specials take the base's bos/eos/pad rows; anything else the mean
    of all base rows. ``keep_first`` (an extended vocabulary, see :func:`extend_embeddings`): ids below it keep
    their base rows and only the ids after it are initialised. Returns counts:
    ``{"kept", "mean_init", "byte", "special", "fallback", "random"}``.

    Example: the new piece ``"▁evlərimizdən"`` -> text ``" evlərimizdən"`` -> base pieces
    ``[" ev", "lər", "imiz", "dən"]`` -> its row is the mean of those four base rows.
    """
    base_tok, new_tok = _as_tok(base_tokenizer), _as_tok(new_tokenizer)
    emb_in = model.get_input_embeddings().weight.detach().clone().float()
    out_mod = model.get_output_embeddings()
    tied = bool(getattr(model.config, "tie_word_embeddings", False)) or (
        out_mod is not None and out_mod.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    )
    emb_out = None if tied or out_mod is None else out_mod.weight.detach().clone().float()
    n_base = emb_in.shape[0]
    texts = _token_texts(new_tok)
    base_vocab = _hf_vocab(base_tok) or {}
    V = new_tok.vocab_size
    new_in = torch.empty(V, emb_in.shape[1])
    new_out = torch.empty(V, emb_in.shape[1]) if emb_out is not None else None
    gen = torch.Generator().manual_seed(0)
    counts = {"kept": 0, "mean_init": 0, "byte": 0, "special": 0, "fallback": 0, "random": 0}
    specials = {new_tok.bos_id: base_tok.bos_id, new_tok.eos_id: base_tok.eos_id, new_tok.pad_id: base_tok.pad_id}

    def rows(src: torch.Tensor, ids: list[int]) -> torch.Tensor:
        return src[torch.tensor(ids, dtype=torch.long)].mean(0)

    if init not in ("mean", "random"):
        raise ValueError(f"init must be 'mean' or 'random', got {init!r}")
    for i in range(V):
        if i < keep_first:
            new_in[i] = emb_in[i]
            if new_out is not None:
                new_out[i] = emb_out[i]
            counts["kept"] += 1
            continue
        if init == "random":
            counts["random"] += 1
            new_in[i] = torch.randn(emb_in.shape[1], generator=gen) * emb_in.std() + emb_in.mean()
            if new_out is not None:
                new_out[i] = torch.randn(emb_in.shape[1], generator=gen) * emb_out.std() + emb_out.mean()
            continue
        ids, kind = _row_sources(texts[i], specials.get(i), base_tok, base_vocab, n_base)
        counts[kind] += 1
        new_in[i] = rows(emb_in, ids) if ids else emb_in.mean(0)
        if new_out is not None:
            new_out[i] = rows(emb_out, ids) if ids else emb_out.mean(0)
    _install_rows(model, new_in, new_out, new_tok)
    return counts


def _install_rows(model, new_in: torch.Tensor, new_out: torch.Tensor | None, new_tok) -> None:
    """Resize the model to the new rows, copy them in (tying the output layer back when it was tied) and point
    the config's special ids at the new tokenizer's."""
    dtype = model.get_input_embeddings().weight.dtype
    model.resize_token_embeddings(new_in.shape[0], mean_resizing=False)
    model.get_input_embeddings().weight.copy_(new_in.to(dtype))
    if new_out is not None:
        model.get_output_embeddings().weight.copy_(new_out.to(dtype))
    else:
        model.tie_weights()
    model.config.vocab_size = new_in.shape[0]
    for k in ("bos", "eos", "pad"):
        v = getattr(new_tok, f"{k}_id")
        if v is not None:
            setattr(model.config, f"{k}_token_id", v)
            if getattr(model, "generation_config", None) is not None:
                setattr(model.generation_config, f"{k}_token_id", v)


def extend_embeddings(model, base_tokenizer, extended_tokenizer, *, init: str = "mean") -> dict:
    """Grow ``model``'s embeddings (input and, when untied, output) to an extended tokenizer (in place): every base
    row stays, each new token's row is the mean of the base rows of the pieces the base tokenizer cuts its text
    into (``init="mean"``), or a random row with the base rows' mean and std (``init="random"``).

    >>> counts = extend_embeddings(model, "tokenizers/llama3.1", "artifacts/llama3-az8k")  # doctest: +SKIP
    >>> counts["kept"], counts["mean_init"]  # doctest: +SKIP
    (128256, 7998)
    """
    base_tok, new_tok = _as_tok(base_tokenizer), _as_tok(extended_tokenizer)
    rows = model.get_input_embeddings().weight.shape[0]
    if base_tok.vocab_size > rows or new_tok.vocab_size <= base_tok.vocab_size:
        raise ValueError(
            f"{new_tok.name} ({new_tok.vocab_size} ids) does not extend {base_tok.name} "
            f"({base_tok.vocab_size} ids) on a model of {rows} rows"
        )
    # rows past the base tokenizer (a padded embedding, as in Qwen) are initialised like the new tokens
    return swap_tokenizer_embeddings(model, base_tok, new_tok, init=init, keep_first=base_tok.vocab_size)


# --------------------------------------------------------------------------------------------------- liger


def liger_available(allow_interpreter: bool = False) -> tuple[bool, str]:
    """Whether Liger's Triton kernels can run here, and why (not).

    >>> ok, why = liger_available()  # on a CPU-only machine:  # doctest: +SKIP
    (False, 'no CUDA device: Liger Kernel needs a GPU for its Triton kernels; training runs without them')
    """
    if torch.cuda.is_available():
        return True, f"CUDA device {torch.cuda.get_device_name(0)}"
    if os.environ.get("TRITON_INTERPRET") == "1":
        if allow_interpreter:
            return True, "TRITON_INTERPRET=1: Triton's CPU interpreter (exact, very slow; for parity tests)"
        return False, (
            "TRITON_INTERPRET=1 is set but the interpreter is not allowed for this run (it is only "
            "meant for parity tests); training runs without Liger"
        )
    return False, "no CUDA device: Liger Kernel needs a GPU for its Triton kernels; training runs without them"


def _has_lora_on_lm_head(model) -> bool:
    return any("lm_head" in n and "lora_" in n for n, _ in model.named_parameters())


def apply_liger(model, kernels, *, allow_interpreter: bool = False) -> dict:
    """Apply the requested Liger kernels to ``model`` (a ``LlamaForCausalLM``, before LoRA) through Liger's API.

    ``kernels``: an iterable of names from :data:`LIGER_KERNELS` or a dict ``{name: bool}``. Returns
    ``{"requested": [...], "applied": [...], "available": bool, "reason": str}``: pass ``applied`` on to whatever
    depends on it (e.g. ``apply_lora(liger_flce=...)``). Without CUDA nothing is applied (see the module
    docstring).

    >>> apply_liger(build_model(model_config("tiny", 1000)), ["rope"])  # on CPU  # doctest: +SKIP
    {'requested': ['rope'], 'applied': [], 'available': False, 'reason': 'no CUDA device: ...'}
    """
    if isinstance(kernels, dict):
        requested = [k for k, v in kernels.items() if v]
    else:
        requested = list(kernels or [])
    unknown = [k for k in requested if k not in LIGER_KERNELS]
    if unknown:
        raise LigerError(f"unknown Liger kernel(s) {unknown}; choose from {list(LIGER_KERNELS)}")
    requested = [k for k in LIGER_KERNELS if k in requested]
    if "cross_entropy" in requested and "fused_linear_cross_entropy" in requested:
        raise LigerError(
            "cross_entropy and fused_linear_cross_entropy are exclusive: the fused one already "
            "computes the cross-entropy; request only one"
        )
    ok, reason = liger_available(allow_interpreter)
    result = {"requested": requested, "applied": [], "available": ok, "reason": reason}
    if requested and not ok:
        warnings.warn(f"Liger kernels {requested} requested but NOT applied: {reason}", stacklevel=2)
    if requested and ok:
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        if model_type != "llama":
            raise LigerError(f"azllm applies Liger to Llama models only, got model_type={model_type!r}")
        if "fused_linear_cross_entropy" in requested and _has_lora_on_lm_head(model):
            raise LigerError(
                "fused_linear_cross_entropy reads lm_head.weight directly and would silently skip the "
                "LoRA adapter on lm_head: apply Liger before LoRA (apply_lora then leaves lm_head out) "
                "or turn fused_linear_cross_entropy off"
            )
        from liger_kernel.transformers import _apply_liger_kernel_to_instance

        target = model.get_base_model() if hasattr(model, "get_base_model") else model
        _apply_liger_kernel_to_instance(target, **{k: (k in requested) for k in LIGER_KERNELS})
        result["applied"] = list(requested)
        log.info("Liger kernels applied: %s (%s)", requested, reason)
    return result
