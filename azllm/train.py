"""Training with the Hugging Face Trainer, fed by token files: full training from scratch, LoRA or QLoRA.

One call, :func:`run_training`, turns params + a tokenizer + token files into a trained model and a plain dict of
results (loss and bits-per-byte curves, tokens/s, peak memory, final val loss/bpb, checkpoint and final folders).
The HF Trainer does the loop, so accelerate / DDP / FSDP / DeepSpeed and ``torchrun`` work unchanged
(``torchrun --nproc-per-node 2 -m azllm.train params.yaml``). Decisions:

- **Data**: training windows are :class:`azllm.tokens.TokenWindowDataset` items (``block_size`` tokens, labels ==
  input ids; the model shifts them). The Trainer's sampler shuffles them (seeded) and, under DDP, gives each rank
  different windows. Evaluation uses the first ``eval_max_tokens`` tokens of each set as fixed windows.
- **Bits per byte** (comparable across tokenizers): over the evaluated windows, ``bpb = sum of the next-token NLL
  (nats) / ln 2 / B`` where ``B`` is the number of UTF-8 bytes of the text the *predicted* tokens decode to:
  the predicted ids are cut at every EOS, each piece is decoded with the tokenizer and its UTF-8 bytes are counted,
  and each EOS counts as 1 byte (the newline that separated the documents in the corpus). The summed NLL is the
  Trainer's eval loss times the number of predicted tokens (every window has the same length, so the mean over
  windows is the mean over tokens). Perplexity is ``exp(loss)`` per token of *this* tokenizer (not comparable
  across tokenizers; bpb is).
- **Schedule**: linear warmup then cosine decay to ``lr * min_lr_ratio`` (``cosine_with_min_lr``); AdamW with
  decay on matrices only; gradient clipping; gradient accumulation; gradient checkpointing on request (non-reentrant).
- **Precision**: ``auto`` = bf16 autocast on GPUs that support it, fp16 (with loss scaling) on older GPUs, fp32 on
  CPU (CPU bf16 autocast is slower than fp32 on few cores and less exact); ``bf16``/``fp16``/``fp32`` force it.
- **Checkpoints**: every ``save_steps``, safetensors (adapters alone for LoRA/QLoRA, peft's ``save_pretrained``),
  plus optimizer, scheduler, RNG states and the Trainer state, keeping the last ``save_total_limit``. The Trainer
  writes a checkpoint folder in place, so a checkpoint only counts once ``azllm_complete.json`` is written in it
  (atomically, after everything else): resume picks the newest *complete* checkpoint and ignores a half-written one.
- **Resume**: with ``train.resume`` a run whose output folder holds a complete checkpoint continues from it: weights,
  optimizer, scheduler, RNG states and the data position (the Trainer replays the seeded sampler and skips the
  batches already seen), so the loss curve is the one of an uninterrupted run (tested). The output folder's name
  includes a hash of everything that shapes the run, so a changed run never resumes from another's checkpoint; a
  run whose ``results.json`` already exists is returned as is.
- **Non-finite loss**: a forward hook checks every training loss; a NaN/inf raises :class:`NonFiniteLossError` at
  once (before the backward pass), naming the step and the last good checkpoint. Weights are also checked before
  each checkpoint is written, so a checkpoint never holds NaN weights.
- **Safety**: no ``trust_remote_code``; weights are safetensors; the Trainer loads optimizer/scheduler/RNG states
  with ``torch.load(weights_only=True)``.
- **Throughput** (:class:`ThroughputCallback`): tokens/s over optimizer steps after ``timing_warmup_steps``,
  leaving out intervals that contained an evaluation or a checkpoint; step time; peak memory: CUDA
  ``max_memory_allocated`` / ``max_memory_reserved``, on CPU the peak RSS sampled at every step of this run
  (``peak_rss_mb``) and the process's lifetime peak (``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

from .config import artifacts_dir, data_root, load_params
from .utils import atomic_write_json, peak_rss_mb, reset_peak_rss, seed_everything, vm_hwm_mb

__all__ = ["run_training", "run_summary", "compare_rows", "prepare_data", "build_training_model", "ThroughputCallback", "SafetyCallback",
           "NonFiniteLossError", "count_bytes", "bytes_per_token", "make_eval_set", "compare_methods",
           "latest_checkpoint", "load_trained", "generate", "precision_flags", "METHODS"]

METHODS = ("full", "lora", "qlora")
COMPLETE = "azllm_complete.json"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


# ----------------------------------------------------------------------------------------------------- data

def prepare_data(P: dict, *, progress: bool = True) -> dict:
    """The run's tokenizer and token files: ``{"tokenizer": Tok, "tokenizer_dir", "train", "val", "dev": {...}}``.

    The tokenizer is ``azllm.tokens.main_tokenizer(P)`` (the run's tokenizer, trained once into
    ``artifacts_dir(P)/tokenizer`` and shared with the other notebooks) and the corpus goes through
    ``azllm.tokens.encode_run(P)`` (``tokens`` params: directory, val fraction, split seed). Each ``data.eval`` set
    (all of it) goes to ``artifacts_dir(P)/tokens_dev/<name>``. All of it is idempotent.
    """
    from . import tokens as T
    from .data import iter_documents, resolve_source
    from .tokenizer import load_tokenizer, train_tokenizer

    root = data_root(P)
    if hasattr(T, "main_tokenizer") and hasattr(T, "encode_run"):  # the tokens module's run-level helpers
        tok = T.main_tokenizer(P)
        res = T.encode_run(P, tok, progress=progress)
    else:
        resolved = resolve_source(P["data"]["train"], root)
        tp = P["tokenizer"]
        opts = {k: tp[k] for k in ("vocab_size", "model_type", "character_coverage", "byte_fallback", "split_digits",
                                   "max_piece_length", "affix_presplit", "split_by_whitespace",
                                   "input_sentence_size", "num_threads")}
        folder = train_tokenizer(iter_documents(resolved), artifacts_dir(P) / "tokenizer", seed=P["seed"], **opts)
        tok = load_tokenizer(folder)
        res = T.encode_source(resolved, tok, artifacts_dir(P) / "tokens", val_fraction=0.01, seed=0,
                              progress=progress)
    dev = {}
    for name, spec in (P["data"].get("eval") or {}).items():
        r = T.encode_source(resolve_source(spec, root), tok, artifacts_dir(P) / "tokens_dev" / name,
                            val_fraction=0.0, seed=0, progress=False)
        dev[name] = r["train"]
    return {"tokenizer": tok, "tokenizer_dir": tok.path, "train": res["train"], "val": res["val"], "dev": dev,
            "encode": {k: v for k, v in res.items() if isinstance(v, (int, float, str, bool))}}


def count_bytes(ids, tokenizer, eos_id: int | None = None) -> int:
    """UTF-8 bytes of the text that ``ids`` decode to, each EOS counting 1 byte (the document separator).

    >>> count_bytes(tok.encode("Salam") + [tok.eos_id] + tok.encode("dünya"), tok)  # doctest: +SKIP
    12
    """
    eos = tokenizer.eos_id if eos_id is None else eos_id
    ids = np.asarray(ids, dtype=np.int64).ravel()
    cuts = np.flatnonzero(ids == eos) if eos is not None else np.zeros(0, dtype=np.int64)
    total, start = 0, 0
    for c in list(cuts) + [len(ids)]:
        if c > start:
            total += len(tokenizer.decode(ids[start:c].tolist()).encode("utf-8"))
        start = c + 1
    return total + len(cuts)


def bytes_per_token(token_file, tokenizer, max_tokens: int = 200_000) -> float:
    """UTF-8 bytes per token over the first ``max_tokens`` tokens of a token file (see :func:`count_bytes`).

    Used to put the *training* loss on the bits-per-byte scale (``bpb ~ loss / ln 2 / bytes_per_token``), an
    approximation since the training windows are random; the evaluation bpb is exact.
    """
    from .tokens import TokenFile

    tf = token_file if isinstance(token_file, TokenFile) else TokenFile(token_file, tokenizer)
    ids = np.asarray(tf.tokens[:max_tokens], dtype=np.int64)
    return count_bytes(ids, tokenizer, tf.eos_id) / max(len(ids), 1)


def make_eval_set(token_file, tokenizer, block_size: int, max_tokens: int | None = None) -> dict:
    """Fixed evaluation windows over the start of a token file, and the bytes their predictions cover.

    Returns ``{"dataset", "windows", "predicted_tokens", "bytes"}``. Window ``k`` holds tokens
    ``[k*B, (k+1)*B)``; the model predicts tokens ``k*B+1 .. (k+1)*B-1`` from it.
    """
    from torch.utils.data import Subset

    from .tokens import TokenFile, TokenWindowDataset

    tf = token_file if isinstance(token_file, TokenFile) else TokenFile(token_file, tokenizer)
    ds = TokenWindowDataset(tf, block_size)
    n = len(ds) if not max_tokens else max(1, min(len(ds), int(max_tokens) // block_size))
    toks = np.asarray(tf.tokens[: n * block_size], dtype=np.int64).reshape(n, block_size)
    pred = toks[:, 1:]
    nbytes = sum(count_bytes(row, tokenizer, tf.eos_id) for row in pred)
    return {"dataset": Subset(ds, list(range(n))), "windows": n, "predicted_tokens": int(pred.size),
            "bytes": int(nbytes)}


# ------------------------------------------------------------------------------------------------ callbacks

def _trainer_callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class ThroughputCallback(_trainer_callback_base()):
    """Tokens/s (after ``warmup_steps``, without eval/save intervals), step time and peak memory of a run.

    Peak memory: on CUDA ``max_memory_allocated`` / ``max_memory_reserved`` since the start of training; on CPU
    ``peak_rss_mb`` is the process's RSS high-water mark since the start of training (Linux ``VmHWM``, reset at
    train begin through ``/proc/self/clear_refs``; elsewhere the maximum of the RSS sampled after every step), and
    ``process_peak_rss_mb`` the lifetime ``ru_maxrss`` (which a child process inherits from its parent).

    ``tokens_per_step`` = per-device batch x grad accumulation x block size x world size. Results in
    :meth:`summary`; per-step times in ``step_times``.
    """

    def __init__(self, tokens_per_step: int, warmup_steps: int = 5):
        self.tokens_per_step = int(tokens_per_step)
        self.warmup_steps = int(warmup_steps)
        self.step_times: list[float] = []
        self._last = None
        self._dirty = False
        self.peak_rss = 0.0
        self.cuda = torch.cuda.is_available()

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def on_train_begin(self, args, state, control, **kw):
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self._hwm_reset = reset_peak_rss()
        self._last = self._now()
        self._start_step = state.global_step

    def on_step_end(self, args, state, control, **kw):
        now = self._now()
        if not self._dirty and state.global_step - self._start_step > self.warmup_steps:
            self.step_times.append(now - self._last)
        self._dirty = False
        self._last = now
        try:
            import psutil

            self.peak_rss = max(self.peak_rss, psutil.Process().memory_info().rss / 2**20)
        except ImportError:
            pass

    def on_evaluate(self, args, state, control, **kw):
        self._dirty = True
        self._last = self._now()

    def on_save(self, args, state, control, **kw):
        self._dirty = True
        self._last = self._now()

    def summary(self) -> dict:
        t = self.step_times
        out = {"timed_steps": len(t), "tokens_per_step": self.tokens_per_step,
               "step_time_s": float(np.median(t)) if t else None,
               "tokens_per_s": self.tokens_per_step * len(t) / sum(t) if t else None,
               "peak_rss_mb": round(self.peak_rss, 1), "process_peak_rss_mb": round(peak_rss_mb(), 1)}
        hwm = vm_hwm_mb()
        if hwm is not None and getattr(self, "_hwm_reset", False):
            out["peak_rss_mb"] = round(max(hwm, self.peak_rss), 1)
        if self.cuda:
            out["cuda_max_allocated_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
            out["cuda_max_reserved_mb"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
        return out


class SafetyCallback(_trainer_callback_base()):
    """NaN/inf loss stop, finite weights before every checkpoint, complete-checkpoint marker, 4-bit repack check,
    and bits per byte / perplexity added to every evaluation's metrics."""

    def __init__(self, model, eval_info: dict[str, dict], output_dir: Path):
        self.model = model
        self.eval_info = eval_info
        self.output_dir = Path(output_dir)
        self.step = 0
        self.handle = model.register_forward_hook(self._check_loss)

    def _check_loss(self, module, args, output):
        loss = getattr(output, "loss", None)
        if module.training and loss is not None and not torch.isfinite(loss.detach()).all():
            ck = latest_checkpoint(self.output_dir)
            raise NonFiniteLossError(
                f"training loss is {loss.detach().float().item()} at step {self.step + 1}: the run is stopped "
                f"(no update was made with it). Last good checkpoint: {ck or 'none yet'}. Lower train.lr, raise "
                f"train.warmup_steps or check the data; resume from the checkpoint with train.resume: true.")

    def on_train_begin(self, args, state, control, **kw):
        from .lora import check_not_repacked

        check_not_repacked(self.model)
        self.step = state.global_step

    def on_step_end(self, args, state, control, **kw):
        self.step = state.global_step
        if control.should_save:
            bad = [n for n, p in self.model.named_parameters() if not torch.isfinite(p.detach()).all()]
            if bad:
                control.should_save = False
                raise NonFiniteLossError(f"weights became non-finite at step {state.global_step} ({bad[:3]}...); "
                                         f"not saved. Last good checkpoint: {latest_checkpoint(self.output_dir)}")

    def on_evaluate(self, args, state, control, metrics=None, **kw):
        from .lora import check_not_repacked

        check_not_repacked(self.model)
        if metrics is None:
            return
        extra = {}
        for name, info in self.eval_info.items():
            loss = metrics.get(f"eval_{name}_loss")
            if loss is None:
                continue
            extra[f"eval_{name}_ppl"] = math.exp(min(loss, 50.0))
            extra[f"eval_{name}_bpb"] = loss * info["predicted_tokens"] / math.log(2) / info["bytes"]
        metrics.update(extra)
        if state.log_history and any(k.startswith("eval_") for k in state.log_history[-1]):
            state.log_history[-1].update(extra)

    def on_save(self, args, state, control, **kw):
        if args.should_save:
            ck = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if ck.is_dir():
                atomic_write_json(ck / COMPLETE, {"step": state.global_step, "time": time.time()})

    def on_train_end(self, args, state, control, **kw):
        self.handle.remove()


def latest_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint (``checkpoint-N`` holding ``azllm_complete.json``) of a run, or None."""
    d = Path(output_dir)
    cks = [p for p in d.glob("checkpoint-*") if p.is_dir() and (p / COMPLETE).is_file()
           and p.name.split("-")[-1].isdigit()]
    return max(cks, key=lambda p: int(p.name.split("-")[-1])) if cks else None


# ---------------------------------------------------------------------------------------------------- model

def precision_flags(precision: str) -> dict:
    """``{"bf16": bool, "fp16": bool}`` for the Trainer (see the module docstring)."""
    cuda = torch.cuda.is_available()
    if precision == "auto":
        if cuda:
            return {"bf16": torch.cuda.is_bf16_supported(), "fp16": not torch.cuda.is_bf16_supported()}
        return {"bf16": False, "fp16": False}
    if precision == "fp32":
        return {"bf16": False, "fp16": False}
    if precision == "bf16":
        return {"bf16": True, "fp16": False}
    if precision == "fp16":
        if not cuda:
            raise ValueError("train.precision fp16 needs a CUDA GPU (fp16 autocast with loss scaling); use bf16 "
                             "or fp32 on CPU")
        return {"bf16": False, "fp16": True}
    raise ValueError(f"train.precision must be auto, fp32, bf16 or fp16, got {precision!r}")


def build_training_model(P: dict, tokenizer, method: str, base: str | os.PathLike | None = None,
                         seed: int | None = None):
    """The model a run trains: from scratch (``model.preset``), or a base (``base`` argument, else
    ``model.base``) with the tokenizer swapped in when its vocabulary differs; Liger applied; LoRA/QLoRA wrapped.

    Returns ``(model, info)`` with ``info = {"liger": ..., "parameters": ..., "source": ...}``.
    """
    from .lora import apply_lora, quantize_model
    from .model import apply_liger, build_model, count_parameters, load_base_with_tokenizer_swap, model_config

    if method not in METHODS:
        raise ValueError(f"train.method must be one of {METHODS}, got {method!r}")
    M = P["model"]
    dtype = _DTYPES[M["dtype"]]
    seed = P["seed"] if seed is None else seed
    base = base or M["base"]
    if base is None:
        model = build_model(model_config(M["preset"], tokenizer.vocab_size, **(M["config"] or {})), dtype=dtype,
                            seed=seed)
        source = f"random init, preset {M['preset']}"
    elif (Path(base) / "azllm_model.json").is_file():  # a model trained by azllm with this tokenizer
        from transformers import LlamaForCausalLM

        model = LlamaForCausalLM.from_pretrained(str(base), dtype=dtype, use_safetensors=True)
        source = f"azllm model {base}"
    else:
        model = load_base_with_tokenizer_swap(base, M["base_tokenizer"] or base, tokenizer, dtype=dtype,
                                              init=M["swap_init"])
        source = f"base {base}, tokenizer swapped ({M['swap_init']} init)"
    if model.config.vocab_size != tokenizer.vocab_size:
        raise ValueError(f"model vocab {model.config.vocab_size} != tokenizer vocab {tokenizer.vocab_size}")
    liger = apply_liger(model, M["liger"])
    if method == "qlora":
        q = M["quant"]
        qmodel = quantize_model(model, bits=q["bits"], double_quant=q["double_quant"], quant_type=q["quant_type"],
                                compute_dtype=_DTYPES[q["compute_dtype"]])
        if liger["applied"]:  # quantize_model reloads the model: patch the new instance
            liger = apply_liger(qmodel, liger["applied"])
        model = qmodel
    if method in ("lora", "qlora"):
        L = P["model"]["lora"]
        torch.manual_seed(seed)
        model = apply_lora(model, r=L["r"], alpha=L["alpha"], dropout=L["dropout"], use_rslora=L["use_rslora"],
                           target_modules=L["target_modules"] or "all-linear", kbit=(method == "qlora"),
                           gradient_checkpointing=P["train"]["gradient_checkpointing"])
    return model, {"liger": liger, "parameters": count_parameters(model), "source": source}


# ---------------------------------------------------------------------------------------------------- train

def _run_key(P: dict, method: str, base, max_steps: int, lr: float, tokenizer, token_files: dict) -> str:
    from .tokens import read_header

    blob = {"model": P["model"], "train": {k: v for k, v in P["train"].items()
                                           if k not in ("resume", "compare", "compare_steps", "compare_lr",
                                                        "generate")},
            "method": method, "base": str(base) if base else None, "max_steps": max_steps, "lr": lr,
            "seed": P["seed"], "tokenizer": tokenizer.fingerprint,
            "data": {k: read_header(v).get("key") for k, v in token_files.items()}}
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _curves(log_history: list[dict]) -> dict:
    train = [{"step": h["step"], "loss": h["loss"], "lr": h.get("learning_rate"), "grad_norm": h.get("grad_norm")}
             for h in log_history if "loss" in h]
    evals: dict[str, list] = {}
    for h in log_history:
        for k, v in h.items():
            if k.startswith("eval_") and k.endswith("_loss"):
                name = k[len("eval_"):-len("_loss")]
                evals.setdefault(name, []).append({"step": h["step"], "loss": v, "ppl": h.get(f"eval_{name}_ppl"),
                                                   "bpb": h.get(f"eval_{name}_bpb")})
    return {"train": train, "eval": evals}


def run_training(P: dict, *, tokenizer, token_files: dict, dev_files: dict | None = None, method: str | None = None,
                 base: str | os.PathLike | None = None, max_steps: int | None = None, lr: float | None = None,
                 output_dir: str | os.PathLike | None = None, resume: bool | None = None,
                 callbacks: list | tuple = (), progress: bool = True) -> dict:
    """Train one model with the HF Trainer and return a plain dict of results.

    ``token_files``: ``{"train": path, "val": path}`` (:mod:`azllm.tokens` files made with ``tokenizer``);
    ``dev_files``: ``{name: path}`` extra eval sets (see :func:`prepare_data`). ``method`` / ``max_steps`` / ``lr``
    default to ``P["train"]``; ``base`` to ``P["model"]["base"]``. The output folder defaults to
    ``artifacts_dir(P)/train/<method>-<hash>``.

    Returns ``{"method", "output_dir", "final_dir", "checkpoint", "curves": {"train": [...], "eval": {set: [...]}},
    "final": {set: {"loss", "ppl", "bpb"}}, "throughput": {...}, "liger": {...}, "parameters": {...},
    "steps", "seconds", "resumed_from", "eval_sets": {...}}``.

    >>> r = run_training(P, tokenizer=tok, token_files={"train": ..., "val": ...})  # doctest: +SKIP
    >>> r["final"]["val"]["bpb"]  # doctest: +SKIP
    """
    from transformers import Trainer, TrainingArguments

    from .lora import make_optimizer
    from .tokens import TokenFile, TokenWindowDataset

    T = P["train"]
    method = method or T["method"]
    max_steps = int(max_steps or T["max_steps"])
    lr = float(lr if lr is not None else T["lr"])
    resume = T["resume"] if resume is None else resume
    key = _run_key(P, method, base, max_steps, lr, tokenizer, token_files)
    out = Path(output_dir) if output_dir else artifacts_dir(P) / "train" / f"{method}-{key}"
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.json"
    if resume and results_path.is_file():
        done = json.loads(results_path.read_text())
        if done.get("key") == key:
            done["cached"] = True
            return done
    seed_everything(P["seed"])
    model, info = build_training_model(P, tokenizer, method, base=base)

    train_tf = TokenFile(token_files["train"], tokenizer)
    train_ds = TokenWindowDataset(train_tf, T["block_size"])
    eval_sets = {"val": token_files["val"], **(dev_files or {})}
    if T["dev_sets"] is not None:
        eval_sets = {k: v for k, v in eval_sets.items() if k == "val" or k in T["dev_sets"]}
    eval_info = {name: make_eval_set(path, tokenizer, T["block_size"], T["eval_max_tokens"])
                 for name, path in eval_sets.items()}
    world = int(os.environ.get("WORLD_SIZE", "1"))
    tps = T["batch_size"] * T["grad_accum"] * T["block_size"] * world
    throughput = ThroughputCallback(tps, T["timing_warmup_steps"])
    safety = SafetyCallback(model, eval_info, out)
    args = TrainingArguments(
        output_dir=str(out), max_steps=max_steps, per_device_train_batch_size=T["batch_size"],
        per_device_eval_batch_size=T["eval_batch_size"], gradient_accumulation_steps=T["grad_accum"],
        learning_rate=lr, lr_scheduler_type="cosine_with_min_lr",
        lr_scheduler_kwargs={"min_lr_rate": float(T["min_lr_ratio"])}, warmup_steps=T["warmup_steps"],
        weight_decay=T["weight_decay"], max_grad_norm=T["grad_clip"], logging_steps=T["logging_steps"],
        eval_strategy="steps", eval_steps=T["eval_steps"], save_strategy="steps", save_steps=T["save_steps"],
        save_total_limit=T["save_total_limit"], activation_checkpointing=T["gradient_checkpointing"],
        activation_checkpointing_kwargs={"use_reentrant": False}, report_to=[], seed=P["seed"],
        data_seed=P["seed"], dataloader_num_workers=0, logging_nan_inf_filter=False,
        remove_unused_columns=False, disable_tqdm=not progress, use_cpu=not torch.cuda.is_available(),
        ddp_backend="gloo" if world > 1 and not torch.cuda.is_available() else None, prediction_loss_only=True,
        **precision_flags(T["precision"]))
    optimizer = make_optimizer(model, T["optimizer"], lr=lr, weight_decay=T["weight_decay"],
                               betas=tuple(T["betas"]))
    trainer = Trainer(model=model, args=args, train_dataset=train_ds,
                      eval_dataset={k: v["dataset"] for k, v in eval_info.items()},
                      optimizers=(optimizer, None), callbacks=[safety, throughput, *callbacks])
    ck = latest_checkpoint(out) if resume else None
    t0 = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=str(ck) if ck else None)
    finally:
        safety.handle.remove()
    seconds = time.perf_counter() - t0
    last = [h for h in trainer.state.log_history if "eval_val_loss" in h]
    if last and last[-1]["step"] == trainer.state.global_step:  # evaluated at the last step already
        final_metrics = {k: v for h in trainer.state.log_history if h.get("step") == trainer.state.global_step
                         for k, v in h.items() if k.startswith("eval_")}
    else:
        final_metrics = trainer.evaluate()
        safety.on_evaluate(args, trainer.state, trainer.control, metrics=final_metrics)
    final = {name: {"loss": final_metrics.get(f"eval_{name}_loss"), "ppl": final_metrics.get(f"eval_{name}_ppl"),
                    "bpb": final_metrics.get(f"eval_{name}_bpb")} for name in eval_info}
    final_dir = out / "final"
    if trainer.is_world_process_zero():
        tmp = out / f".final.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        trainer.save_model(str(tmp))
        atomic_write_json(tmp / "azllm_model.json", {"method": method, "tokenizer": tokenizer.fingerprint,
                                                     "tokenizer_path": tokenizer.path, "key": key})
        if final_dir.exists():
            shutil.rmtree(final_dir)
        os.replace(tmp, final_dir)
    result = {
        "key": key, "method": method, "output_dir": str(out), "final_dir": str(final_dir),
        "checkpoint": str(latest_checkpoint(out)) if latest_checkpoint(out) else None,
        "resumed_from": str(ck) if ck else None, "steps": trainer.state.global_step, "seconds": seconds,
        "curves": _curves(trainer.state.log_history), "final": final, "throughput": throughput.summary(),
        "liger": info["liger"], "parameters": info["parameters"], "source": info["source"],
        "eval_sets": {k: {kk: vv for kk, vv in v.items() if kk != "dataset"} for k, v in eval_info.items()},
        "world_size": world, "precision": precision_flags(T["precision"]), "lr": lr, "max_steps": max_steps,
        "cached": False,
    }
    if trainer.is_world_process_zero():
        atomic_write_json(results_path, result)
    result["model"] = model
    result["trainer"] = trainer
    return result


def compare_methods(params_file: str | os.PathLike, methods: list[str], *, base: str | os.PathLike,
                    max_steps: int, lr: float, timeout: float = 3600) -> list[dict]:
    """Train each method (``full`` / ``lora`` / ``qlora``) from the same ``base`` for ``max_steps``, each in its own
    process (``python -m azllm.train``), so that peak memory is the method's own. Returns their results dicts.
    Runs already finished with the same inputs are reused (see :func:`run_training`).
    """
    import subprocess

    rows = []
    for m in methods:
        cmd = [sys.executable, "-m", "azllm.train", str(params_file), "--method", m, "--base", str(base),
               "--max-steps", str(int(max_steps)), "--lr", repr(float(lr))]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "TQDM_DISABLE": "1"})
        if p.returncode != 0:
            raise RuntimeError(f"{m} run failed ({' '.join(cmd)}):\n{p.stderr[-3000:]}")
        path = Path(p.stdout.strip().splitlines()[-1])
        rows.append(json.loads(path.read_text()))
    return rows


def load_trained(final_dir: str | os.PathLike, dtype: torch.dtype = torch.float32):
    """Load a model saved by :func:`run_training` (full weights, or a base + LoRA adapter) for generation."""
    from transformers import LlamaForCausalLM

    final_dir = Path(final_dir)
    if (final_dir / "adapter_config.json").is_file():
        from peft import AutoPeftModelForCausalLM

        return AutoPeftModelForCausalLM.from_pretrained(str(final_dir), dtype=dtype)
    return LlamaForCausalLM.from_pretrained(str(final_dir), dtype=dtype, use_safetensors=True)


@torch.no_grad()
def generate(model, tokenizer, prompts: list[str], *, max_new_tokens: int = 40, temperature: float = 0.8,
             top_k: int = 50, seed: int = 0) -> list[dict]:
    """Greedy and sampled continuations of each prompt: ``[{"prompt", "greedy", "sampled"}]`` (text only).

    The prompt is encoded without special tokens (as in the token files, where documents follow an EOS, the
    prompt is preceded by EOS). Sampling is seeded.
    """
    from .lora import check_not_repacked

    check_not_repacked(model)
    model.eval()
    dev = next(model.parameters()).device
    rows = []
    for p in prompts:
        ids = torch.tensor([[tokenizer.eos_id] + tokenizer.encode(p)], dtype=torch.long, device=dev)
        row = {"prompt": p}
        for mode in ("greedy", "sampled"):
            torch.manual_seed(seed)
            kw = dict(do_sample=False) if mode == "greedy" else dict(do_sample=True, temperature=temperature,
                                                                       top_k=top_k)
            outp = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                  eos_token_id=tokenizer.eos_id, pad_token_id=tokenizer.pad_id or tokenizer.eos_id,
                                  **kw)
            row[mode] = tokenizer.decode(outp[0, ids.shape[1]:].tolist()).replace("</s>", " ⏎ ")
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------- report rows

def run_summary(result: dict) -> dict:
    """The numbers of one :func:`run_training` result that the report shows and records, flat: method, parameters,
    steps, time, tokens/s, step time, peak memory (RSS; CUDA allocated/reserved on a GPU), Liger flags, the first
    evaluated val loss and the final loss/ppl/bpb of every eval set (``final_<set>_<metric>``)."""
    thr = result["throughput"]
    ev = result["curves"]["eval"]
    out = {"method": result["method"], "source": result["source"],
           "main_parameters": result["parameters"]["total"], "main_trainable": result["parameters"]["trainable"],
           "main_steps": result["steps"], "train_seconds": round(result["seconds"], 1),
           "tokens_per_s": round(thr["tokens_per_s"] or 0, 1), "step_time_s": thr["step_time_s"],
           "peak_rss_mb": thr["peak_rss_mb"],
           **{k: thr[k] for k in ("cuda_max_allocated_mb", "cuda_max_reserved_mb") if k in thr},
           "liger_requested": result["liger"]["requested"], "liger_applied": result["liger"]["applied"],
           "liger_reason": result["liger"]["reason"]}
    if ev.get("val"):
        out.update(first_val_loss=ev["val"][0]["loss"], first_val_step=ev["val"][0]["step"])
    out.update({f"final_{name}_{m}": v for name, f in result["final"].items() for m, v in f.items()})
    return out


def compare_rows(runs: list[dict]) -> list[dict]:
    """One row per comparison run (:func:`compare_methods`): trainable/total parameters, tokens/s, step time,
    peak memory and the final val loss and bpb."""
    rows = []
    for r in runs:
        t = r["throughput"]
        rows.append({"method": r["method"], "trainable": r["parameters"]["trainable"],
                     "total": r["parameters"]["total"], "tokens_per_s": round(t["tokens_per_s"] or 0, 1),
                     "step_time_s": round(t["step_time_s"] or 0, 4), "peak_rss_mb": t["peak_rss_mb"],
                     **({"cuda_max_allocated_mb": t["cuda_max_allocated_mb"]} if "cuda_max_allocated_mb" in t else {}),
                     "val_loss": round(r["final"]["val"]["loss"], 4), "val_bpb": round(r["final"]["val"]["bpb"], 4)})
    return rows


# ------------------------------------------------------------------------------------------------------ CLI

def main(argv: list[str] | None = None) -> int:
    """``python -m azllm.train params.yaml [--method lora] [--max-steps N] [--base DIR] [--output-dir DIR]``;
    also under ``torchrun --nproc-per-node K -m azllm.train ...``. Prints the results JSON path."""
    ap = argparse.ArgumentParser(prog="azllm.train", description=main.__doc__)
    ap.add_argument("params")
    ap.add_argument("--method", choices=METHODS)
    ap.add_argument("--max-steps", type=int)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--base")
    ap.add_argument("--output-dir")
    a = ap.parse_args(argv)
    P = load_params(a.params)
    data = prepare_data(P, progress=False)
    r = run_training(P, tokenizer=data["tokenizer"], token_files={"train": data["train"], "val": data["val"]},
                     dev_files=data["dev"], method=a.method, base=a.base, max_steps=a.max_steps, lr=a.lr,
                     output_dir=a.output_dir)
    print(Path(r["output_dir"]) / "results.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
