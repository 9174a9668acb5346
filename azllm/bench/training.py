"""The training benchmark: every variant in a fresh subprocess, measured side by side, explained by the memory model.

:func:`run_variants` takes variant names (see
:func:`azllm.memory.parse_variant`: ``baseline``, ``ckpt``, ``bf16``, ``liger``, ``liger_rope``, ``lora``,
``qlora``, ``adamw8``, and combinations such as ``lora+ckpt``) and runs each with :func:`run_variant` in a fresh
process (:func:`azllm.bench.process.run_fresh` of :func:`measure_variant`) that builds the model with
:func:`azllm.assemble.assemble_model` (the model training trains, :func:`variant_spec`), trains ``untimed_steps``
steps, then ``windows`` timed windows of
``steps`` steps each, and returns one JSON result. Decisions:

- **Fresh process per variant**: peak memory is process-wide, so sharing a process would let one variant's
  allocator caches and leaked tensors inflate the next. The parent only ever reads JSON.
- **Baseline** (how): in the child, after importing torch, transformers, peft, bitsandbytes and azllm's model code,
  loading the token ids and running one small matmul (so the OpenMP pool exists), ``gc.collect()``, then the
  resident set (``VmRSS`` of ``/proc/self/status``) is the baseline and the kernel's high-water mark is reset by
  writing ``5`` to ``/proc/self/clear_refs``. The peak of a window is ``VmHWM`` at its end (the mark is reset at each
  window start), so "measured" is ``VmHWM - baseline``: the memory that building and training the model added.
  On CUDA it is ``torch.cuda.max_memory_allocated`` (and ``max_memory_reserved``) minus the allocated baseline,
  with ``reset_peak_memory_stats`` at each window start.
- **What stays unexplained** on CPU (the measured peak is ~5-10% above the memory model): mostly the BLAS library's
  persistent packing buffers sized by the largest matrix product (~10 MB for a 1024×128·128×8000 product, measured
  in a fresh process), which the minuscule warm-up model does not reach.
- **glibc**: the child runs with ``MALLOC_MMAP_THRESHOLD_=65536`` and ``MALLOC_ARENA_MAX=2``, so that large freed
  tensors go back to the OS instead of staying in malloc's heap, and RSS follows live tensors. Without it glibc
  raises its mmap threshold after the first free and RSS keeps a cache of freed blocks (allocator caching).
- **Load**: the machine's 1-minute load average at the end of each variant is in the table: on a shared machine
  throughput spreads widely, memory does not.
- **Rounds**: ``rounds`` fresh processes per variant, run round-robin (all variants, then all again), and their
  windows pooled: a slow spell of a shared machine then spreads over every variant instead of biasing one.
- **Windows**: throughput is ``batch × seq × steps / time`` of each window after warm-up; the table shows the median
  and min–max over windows, and so for the step time (median step of each window) and peak memory.
- **Loss after N steps**: every variant sees the same batches from the same seed; its first and last loss are
  reported, so a fast but wrong variant shows.
- **Not available**: a variant whose technique cannot run here (Liger without CUDA, a bitsandbytes optimizer
  without its backend) is a result with ``status="unavailable"`` and the reason, never dropped or faked.
- **OOM**: out-of-memory inside the child (``torch.OutOfMemoryError``, ``MemoryError``, "can't allocate memory",
  or the child being killed by SIGKILL) is a result, ``status="oom"`` with "OOM at batch B (seq T)". The memory
  cap ``mem_cap_mb`` (``RLIMIT_AS`` above the baseline's virtual size on CPU, ``set_per_process_memory_fraction``
  on CUDA) simulates a smaller machine.
"""

from __future__ import annotations

import gc
import math
import os
import time
from pathlib import Path

from .. import memory as mem
from ..utils import atomic_write_bytes, progress, reset_peak_rss
from .process import run_fresh

__all__ = [
    "run_variants",
    "run_variant",
    "measure_variant",
    "variant_spec",
    "oom_probe",
    "synthetic_ids",
    "corpus_ids",
    "tokens_needed",
    "model_shape",
    "resolve_device",
    "CHILD_ENV",
]

CHILD_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_ARENA_MAX": "2", "TOKENIZERS_PARALLELISM": "false"}
MB = 2**20
WARMUP_SHAPE = {
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
}


# ------------------------------------------------------------------------------------------------ the token ids
def _save_npy(path: Path, arr) -> None:
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, arr)
    atomic_write_bytes(path, buf.getvalue())


def tokens_needed(*, untimed_steps: int, windows: int, steps: int, batch_sizes: list[int], seq_len: int) -> int:
    """Ids every variant needs: all its steps at the largest batch it may run (OOM probes included)."""
    return (untimed_steps + windows * steps) * max(batch_sizes) * (seq_len + 1)


def synthetic_ids(workdir: Path, vocab_size: int, n_tokens: int, seed: int) -> tuple[Path, int, str]:
    """Ids drawn from a Zipf law (exponent 1.1) over the vocabulary (no data needed: the GPU run uses it); the
    loss falls from ln V toward the unigram entropy. Returns ``(npy path, vocab_size, description)``."""
    import numpy as np

    path = Path(workdir) / f"synthetic-v{vocab_size}-n{n_tokens}-s{seed}.npy"
    if not path.is_file():
        rng = np.random.default_rng(seed)
        p = 1.0 / np.arange(1, vocab_size + 1) ** 1.1
        _save_npy(path, rng.choice(vocab_size, size=n_tokens, p=p / p.sum()).astype(np.int64))
    return path, vocab_size, f"synthetic Zipf(1.1) ids over {vocab_size} tokens, seed {seed}"


def corpus_ids(docs: list[str], workdir: Path, tokenizer, n_tokens: int, source: str) -> tuple[Path, int, str]:
    """The first ``n_tokens`` ids of ``docs`` encoded with ``tokenizer`` (EOS after each document; a small corpus
    is cycled, as the description says), so the loss is that of Azerbaijani text."""
    import numpy as np

    ids: list[int] = []
    for doc_ids in tokenizer.encode_batch(docs):
        ids.extend(doc_ids + [tokenizer.eos_id])
        if len(ids) >= n_tokens:
            break
    if len(ids) < n_tokens:
        ids = (ids * math.ceil(n_tokens / max(1, len(ids))))[:n_tokens]
    path = Path(workdir) / f"corpus-v{tokenizer.vocab_size}-{tokenizer.fingerprint[:12]}-n{n_tokens}.npy"
    _save_npy(path, np.asarray(ids[:n_tokens], dtype=np.int64))
    return (
        path,
        tokenizer.vocab_size,
        (f"{source} encoded with a {tokenizer.vocab_size}-piece {tokenizer.kind} tokenizer"),
    )


# ----------------------------------------------------------------------------------------------- parent side
def model_shape(preset: str, vocab_size: int, overrides: dict) -> dict:
    """The model config of the benchmark as a plain dict (the fields :mod:`azllm.memory` reads)."""
    from ..model import model_config

    c = model_config(preset, vocab_size, **(overrides or {}))
    keys = (
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "tie_word_embeddings",
    )
    return {k: getattr(c, k, None) for k in keys}


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def run_variant(job: dict, *, timeout_s: float) -> dict:
    """Run one job in a fresh process; always returns a result: ``status`` is ``ok``, ``unavailable``, ``oom``,
    ``timeout`` or ``error``, with ``reason`` for all but ``ok``. A Liger variant where Liger cannot run is
    ``unavailable`` at once (the child's first check, made here): no process starts only to say it."""
    why = _liger_missing(mem.parse_variant(job["variant"]))
    if why:
        res = {"status": "unavailable", "reason": why}
    else:
        res = run_fresh("azllm.bench.training:measure_variant", job, timeout_s=timeout_s, env=CHILD_ENV)
    if res["status"] == "killed":
        res.update(
            status="oom", reason=f"OOM at batch {job['batch']} (seq {job['seq']}): child killed (kernel OOM killer)"
        )
    elif res["status"] == "crashed":
        res["status"] = "error"
    res.update(variant=job["variant"]["name"], batch=job["batch"], seq=job["seq"])
    return res


def run_variants(
    variants: list[mem.Variant],
    base_job: dict,
    *,
    rounds: int,
    timeout_s: float,
    shape: dict,
    device: str,
    show_progress: bool = True,
) -> list[dict]:
    """Every variant in ``rounds`` round-robin rounds of fresh processes (a slow spell of a shared machine hits
    every variant, not one); windows of the same variant are pooled. Each result carries the memory model's
    prediction (``predicted``)."""
    results: dict[str, dict] = {}
    bar = progress(total=rounds * len(variants), desc="benchmark", disable=not show_progress)
    for rnd in range(rounds):
        for v in variants:
            bar.set_postfix_str(f"{v.name} (round {rnd + 1}/{rounds})")
            bar.update(1)
            if v.name in results and results[v.name]["status"] != "ok":
                continue  # unavailable / OOM / error: one process says it
            r = run_variant({**base_job, "variant": v.to_dict()}, timeout_s=timeout_s)
            if v.name not in results:
                r["predicted"] = mem.predict_memory(shape, v, base_job["batch"], base_job["seq"], device=device)
                r["spec"] = v.to_dict()
                r["pids"] = [r["pid"]] if r.get("pid") else []
                results[v.name] = r
            elif r["status"] == "ok":
                _pool(results[v.name], r)
            else:
                results[v.name].setdefault("later_rounds", []).append(
                    {"status": r["status"], "reason": r.get("reason")}
                )
    bar.close()
    return [results[v.name] for v in variants]


def _liger_missing(v: mem.Variant) -> str | None:
    """Why a Liger variant cannot run on this machine (:func:`azllm.model.liger_available`, the check
    :func:`measure_variant` makes first, in an environment the child inherits unchanged), or None."""
    if not v.liger:
        return None
    from ..model import liger_available

    ok, why = liger_available()
    return None if ok else f"not available on this device: {why}"


def _pool(acc: dict, r: dict) -> None:
    """Add the windows of another process of the same variant to ``acc`` (same seed and batches: same losses)."""
    for k in ("tokens_per_s", "step_s", "peak_mb", "reserved_mb"):
        if k in r:
            acc[k] = list(acc.get(k) or []) + list(r[k])
    acc["pids"].append(r.get("pid"))
    acc["wall_s"] = acc.get("wall_s", 0) + r.get("wall_s", 0)
    acc["load_end"] = max(x for x in (acc.get("load_end"), r.get("load_end")) if x is not None)
    acc["loss_last_max_diff"] = max(acc.get("loss_last_max_diff", 0.0), abs(acc["loss_last"] - r["loss_last"]))


def oom_probe(
    variant: mem.Variant,
    base_job: dict,
    *,
    cap_mb: float,
    batches: list[int],
    timeout_s: float,
    shape: dict,
    device: str,
) -> dict:
    """Run ``variant`` under a memory cap (``cap_mb`` above the baseline) at growing batch sizes until it runs out
    of memory: the measured largest batch, next to the fit planner's prediction for that budget."""
    rows = []
    for b in batches:
        job = {
            **base_job,
            "variant": variant.to_dict(),
            "batch": int(b),
            "mem_cap_mb": cap_mb,
            "untimed_steps": 2,
            "steps": 1,
            "windows": 1,
        }
        r = run_variant(job, timeout_s=timeout_s)
        peaks = [x for x in r.get("peak_mb") or [] if x is not None]
        rows.append(
            {
                "batch": int(b),
                "status": r["status"],
                "reason": r.get("reason", ""),
                "peak_mb": sorted(peaks)[len(peaks) // 2] if peaks else None,
                "predicted_mb": mem.predict_memory(shape, variant, int(b), job["seq"], device=device)["total"] / MB,
            }
        )
        if r["status"] != "ok":
            break
    ok = [r["batch"] for r in rows if r["status"] == "ok"]
    return {
        "variant": variant.name,
        "cap_mb": cap_mb,
        "rows": rows,
        "measured_max_batch": max(ok) if ok else 0,
        "first_oom": next((r["reason"] for r in rows if r["status"] == "oom"), None),
        "planner_max_batch": mem.max_batch(shape, variant, base_job["seq"], cap_mb * MB, device=device),
    }


# ------------------------------------------------------------------------------------------------ child side
def _proc_status() -> dict:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM", "VmSize"):
            out[k] = int(v.split()[0]) * 1024
    return out


def _is_oom(e: BaseException) -> bool:
    if isinstance(e, MemoryError):
        return True
    msg = str(e).lower()
    return type(e).__name__ == "OutOfMemoryError" or any(
        s in msg for s in ("out of memory", "can't allocate memory", "not enough memory", "cannot allocate memory")
    )


def variant_spec(
    v: mem.Variant, job: dict, device: str | None = None, *, preset: str | None = None, model: dict | None = None
):
    """The :class:`azllm.assemble.ModelSpec` of a benchmark variant: the job's ``model_spec`` (built from the params
    by the recipe, as training builds its own: :func:`azllm.recipes.benchmark.benchmark_job`) with the variant's
    method, dtype, Liger kernels, quantization, LoRA rank and dropout and checkpointing laid over it, so that a
    variant is the model a run of the same settings trains."""
    from dataclasses import replace

    from ..assemble import ModelSpec

    base = ModelSpec(**{k: tuple(x) if isinstance(x, list) else x for k, x in job["model_spec"].items()})
    return replace(
        base,
        method="qlora" if v.quant else ("lora" if v.lora else "full"),
        preset=preset or base.preset,
        config=dict(base.config if model is None else model),
        dtype=v.dtype,
        liger=tuple(v.liger),
        quant_bits=int(v.quant or base.quant_bits),
        double_quant=bool(v.double_quant),
        compute_dtype=v.dtype,
        kbit_fp32_rest=bool(v.kbit_fp32_rest or base.kbit_fp32_rest),
        lora_r=int(v.lora_r),
        lora_dropout=float(v.lora_dropout),
        gradient_checkpointing=bool(v.grad_ckpt),
        device=device,
    )


def _build(v: mem.Variant, job: dict, device: str, *, model: dict | None = None):
    """``(model, optimizer, liger_report)`` of variant ``v``: :func:`azllm.assemble.assemble_model` of
    :func:`variant_spec` (its one documented order), then the variant's optimizer. ``optimizer`` is None when a
    requested Liger kernel could not be applied (the variant is then "not available")."""
    from .. import lora as azlora
    from ..assemble import assemble_model

    spec = variant_spec(v, job, device, model=model)
    net, info = assemble_model(spec, vocab_size=int(job["vocab_size"]))
    net.config.use_cache = False  # a training step keeps no key/value cache
    rep = info["liger"] if v.liger else None
    if v.liger and set(rep.get("applied", [])) != set(v.liger):
        return net, None, rep
    net.train()
    return net, azlora.make_optimizer(net, v.optimizer, lr=job["lr"], weight_decay=0.1, betas=(0.9, 0.95)), rep


def _step(model, opt, x) -> float:
    loss = model(input_ids=x, labels=x).loss  # the output (and its logits) is dropped at once, as a trainer does
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def _unavailable(v: mem.Variant, device: str) -> str | None:
    """Why this variant cannot run here (checked before anything is built), or None."""
    import torch

    why = _liger_missing(v)
    if why:
        return why
    if device.startswith("cuda") and not torch.cuda.is_available():
        return "not available on this device: no CUDA device"
    return None


def _batches(job: dict) -> list:
    """The step batches of the job, cut from the ids file (cycled when a probe asks for a bigger batch)."""
    import numpy as np
    import torch

    batch, seq = int(job["batch"]), int(job["seq"])
    ids = torch.from_numpy(np.load(job["ids_path"]))
    n_steps = job["untimed_steps"] + job["windows"] * job["steps"]
    span = batch * (seq + 1)
    if ids.numel() < n_steps * span:
        ids = ids.repeat(math.ceil(n_steps * span / ids.numel()))
    return [ids[k * span : (k + 1) * span].view(batch, seq + 1)[:, :seq].contiguous() for k in range(n_steps)]


def _warm_code_paths(v: mem.Variant, job: dict, device: str, x) -> str | None:
    """Two steps of a minuscule model of the same variant, so that lazy imports and one-time library state
    (OpenMP pool, oneDNN, bitsandbytes backend, CUDA context and cuBLAS) land in the baseline."""
    try:
        wm, wopt, _ = _build(v, job, device, model={**job["model_spec"]["config"], **WARMUP_SHAPE})
        if wopt is not None:
            for _ in range(2):
                _step(wm, wopt, x[:1, :8].to(device))
        del wm, wopt
        return None
    except Exception as e:  # noqa: BLE001 - the real build reports the error properly
        return f"{type(e).__name__}: {e}"[:300]


def _baseline(cuda: bool, cap_mb: float | None) -> dict:
    """Take the baseline after the warm-up (RSS, or CUDA allocated), reset the high-water marks, apply the cap."""
    import torch

    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    st = _proc_status()
    out = {"baseline_mb": st["VmRSS"] / MB, "hwm_reset": reset_peak_rss(), "base_alloc": 0}
    if cuda:
        torch.cuda.init()
        torch.cuda.reset_peak_memory_stats()
        out.update(base_alloc=torch.cuda.memory_allocated(), baseline_rss_mb=st["VmRSS"] / MB)
        out["baseline_mb"] = out["base_alloc"] / MB
    if cap_mb:
        if cuda:
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, (out["base_alloc"] + cap_mb * MB) / total))
        else:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (st["VmSize"] + int(cap_mb * MB), resource.RLIM_INFINITY))
        out["mem_cap_mb"] = cap_mb
    return out


def _timed_steps(model, opt, batches: list, job: dict, cuda: bool, base: dict) -> dict:
    """Train every batch; untimed steps first, then ``windows`` windows of ``steps`` steps, each window timed and
    its peak memory taken from a high-water mark reset at its start."""
    import numpy as np
    import torch

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def peak_now() -> dict:
        if cuda:
            return {
                "peak_mb": (torch.cuda.max_memory_allocated() - base["base_alloc"]) / MB,
                "reserved_mb": torch.cuda.max_memory_reserved() / MB,
            }
        return {"peak_mb": _proc_status()["VmHWM"] / MB - base["baseline_mb"]}

    losses, windows, win, out = [], [], None, {"untimed_peak_mb": None}
    tokens_per_step = int(job["batch"]) * int(job["seq"])
    for k, x in enumerate(batches):
        w = k - job["untimed_steps"]
        if w >= 0 and w % job["steps"] == 0:  # a window starts: reset the peak
            sync()
            torch.cuda.reset_peak_memory_stats() if cuda else reset_peak_rss()
            win = {"t0": time.perf_counter(), "steps": []}
        sync()
        ts = time.perf_counter()
        lv = _step(model, opt, x)
        sync()
        losses.append(lv)
        if not math.isfinite(lv):
            return {"status": "error", "reason": f"loss is {lv} at step {k}", "losses": losses}
        if w == -1:
            out["untimed_peak_mb"] = peak_now()["peak_mb"]
        if w >= 0:
            win["steps"].append(time.perf_counter() - ts)
            if len(win["steps"]) == job["steps"]:
                windows.append(
                    {
                        "tokens_per_s": tokens_per_step * job["steps"] / (time.perf_counter() - win["t0"]),
                        "step_s": float(np.median(win["steps"])),
                        **peak_now(),
                    }
                )
    out.update(
        status="ok",
        losses=losses,
        loss_first=losses[0],
        loss_last=losses[-1],
        **{k: [w_[k] for w_ in windows] for k in windows[0]},
    )
    return out


def measure_variant(job: dict) -> dict:
    """One variant in this (fresh) process: availability, warm-up, baseline, build, timed windows."""
    import torch

    v = mem.parse_variant(job["variant"])
    if job.get("threads"):
        torch.set_num_threads(int(job["threads"]))
    device = resolve_device(job["device"])
    cuda = device.startswith("cuda")
    res: dict = {"pid": os.getpid(), "device": device, "variant": v.name, "load_start": os.getloadavg()[0]}
    why = _unavailable(v, device)
    if why:
        return {**res, "status": "unavailable", "reason": why}
    import bitsandbytes  # noqa: F401  (imported before the baseline, like everything any variant may need)
    import peft  # noqa: F401
    import transformers  # noqa: F401

    from .. import lora  # noqa: F401

    batches = _batches(job)
    res["warmup_error"] = _warm_code_paths(v, job, device, batches[0])
    base = _baseline(cuda, job.get("mem_cap_mb"))
    res.update({k: v_ for k, v_ in base.items() if k != "base_alloc"})
    torch.manual_seed(job["seed"])
    try:
        t0 = time.time()
        model, opt, rep = _build(v, job, device)
        if rep is not None:
            res["liger"] = rep
        if opt is None:
            return {**res, "status": "unavailable", "reason": f"not available on this device: {rep.get('reason')}"}
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()  # build transients (e.g. the bf16 copy QLoRA quantizes) out of "reserved"
            batches = [b_.to(device) for b_ in batches]
        res.update(
            params=sum(p.numel() for p in model.parameters()),
            build_s=time.time() - t0,
            trainable=sum(p.numel() for p in model.parameters() if p.requires_grad),
        )
        res.update(_timed_steps(model, opt, batches, job, cuda, base))
    except Exception as e:  # noqa: BLE001 - classified here
        if _is_oom(e):
            return {
                **res,
                "status": "oom",
                "reason": f"OOM at batch {job['batch']} (seq {job['seq']}): "
                f"{type(e).__name__}: {str(e).splitlines()[0][:200]}",
            }
        raise
    res.update(total_s=time.time() - t0, load_end=os.getloadavg()[0])
    return res
