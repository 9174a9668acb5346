"""The training benchmark: every variant in a fresh subprocess, measured side by side, explained by the memory model.

:func:`run_benchmark` takes the ``benchmark`` section of the params and, for each variant name (see
:func:`azllm.memory.parse_variant`: ``baseline``, ``ckpt``, ``bf16``, ``liger``, ``liger_rope``, ``lora``,
``qlora``, ``adamw8``, and combinations such as ``lora+ckpt``), runs :func:`run_variant`: a new Python process
(``python -m azllm.bench JOB RESULT``) that builds the model with :mod:`azllm.model` / :mod:`azllm.lora`, trains
``warmup_steps`` steps that are not timed, then ``repeats`` windows of ``steps`` steps each, and writes one JSON
result. Decisions:

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
- **Repeats**: throughput is ``batch × seq × steps / time`` of each window after warm-up; the table shows the median
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
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from . import memory as mem
from .utils import atomic_write_json, reset_peak_rss

__all__ = ["run_variant", "run_benchmark", "make_job", "prepare_tokens", "oom_probe", "summary_table",
           "prediction_table", "cost_table", "fit_table", "plot_bars", "plot_predicted", "record_all"]

REPO_ROOT = Path(__file__).resolve().parent.parent
CHILD_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_ARENA_MAX": "2", "TOKENIZERS_PARALLELISM": "false"}
MB = 2**20


# ----------------------------------------------------------------------------------------------- parent side
def prepare_tokens(P: dict, workdir: str | os.PathLike) -> tuple[Path, int, str]:
    """Write the token ids every variant trains on (int64 ``.npy``) and return ``(path, vocab_size, description)``.

    ``benchmark.data: synthetic`` draws ids from a Zipf law (exponent 1.1) over the vocabulary with the run's seed
    (no data needed: the GPU script uses it); the loss falls from ln V toward the unigram entropy.
    ``corpus`` trains a SentencePiece tokenizer of ``benchmark.vocab_size`` on ``data.train`` (capped at
    ``benchmark.corpus_bytes``) and encodes the same text, so the loss is that of Azerbaijani text.
    """
    import numpy as np

    B = P["benchmark"]
    need = _tokens_needed(B)
    V = int(B["vocab_size"] or P["tokenizer"]["vocab_size"])
    workdir = Path(workdir)
    if B["data"] == "synthetic":
        path = workdir / f"synthetic-v{V}-n{need}-s{P['seed']}.npy"
        if not path.is_file():
            rng = np.random.default_rng(P["seed"])
            p = 1.0 / np.arange(1, V + 1) ** 1.1
            ids = rng.choice(V, size=need, p=p / p.sum()).astype(np.int64)
            _save_npy(path, ids)
        return path, V, f"synthetic Zipf(1.1) ids over {V} tokens, seed {P['seed']}"
    if B["data"] != "corpus":
        raise ValueError(f"benchmark.data must be 'synthetic' or 'corpus', got {B['data']!r}")
    from .config import data_root
    from .data import iter_documents, resolve_source
    from .tokenizer import load_tokenizer, train_tokenizer

    spec = dict(P["data"]["train"])
    spec["max_bytes"] = min(b for b in (spec.get("max_bytes"), B["corpus_bytes"]) if b) if B["corpus_bytes"] else spec.get("max_bytes")
    resolved = resolve_source(spec, data_root(P))
    docs = list(iter_documents(resolved))
    tok_dir = train_tokenizer(docs, workdir / f"tok-{V}", vocab_size=V, model_type=P["tokenizer"]["model_type"],
                              seed=P["seed"], num_threads=P["tokenizer"]["num_threads"])
    tok = load_tokenizer(tok_dir)
    ids: list[int] = []
    for doc_ids in tok.encode_batch(docs):
        ids.extend(doc_ids + [tok.eos_id])
        if len(ids) >= need:
            break
    if len(ids) < need:
        ids = (ids * math.ceil(need / max(1, len(ids))))[:need]  # small corpus: cycle (stated in the description)
    path = workdir / f"corpus-v{V}-{tok.fingerprint[:12]}-n{need}.npy"
    _save_npy(path, np.asarray(ids[:need], dtype=np.int64))
    return path, tok.vocab_size, f"{resolved.describe()} encoded with a {tok.vocab_size}-piece {tok.kind} tokenizer"


def _save_npy(path: Path, arr) -> None:
    import io

    import numpy as np

    from .utils import atomic_write_bytes

    buf = io.BytesIO()
    np.save(buf, arr)
    atomic_write_bytes(path, buf.getvalue())


def _tokens_needed(B: dict) -> int:
    steps = B["warmup_steps"] + B["repeats"] * B["steps"]
    batch = max([B["batch_size"]] + [int(b) for b in (B["oom_probe"] or {}).get("batches", [])])
    return steps * batch * (B["seq_len"] + 1)


def make_job(P: dict, variant: str, ids_path: str | os.PathLike, vocab_size: int, **over: Any) -> dict:
    """The JSON job of one child process (everything it needs; nothing else is shared)."""
    B = P["benchmark"]
    v = mem.parse_variant(variant, dtype=B["dtype"], lora_r=B["lora"]["r"], lora_dropout=B["lora"]["dropout"])
    job = {
        "variant": v.to_dict(), "preset": B["preset"], "model": dict(B["model"] or {}), "vocab_size": vocab_size,
        "batch": B["batch_size"], "seq": B["seq_len"], "warmup_steps": B["warmup_steps"], "steps": B["steps"],
        "repeats": B["repeats"], "lr": B["lr"], "seed": P["seed"], "device": B["device"], "threads": B["threads"],
        "ids_path": str(ids_path), "mem_cap_mb": B["mem_cap_mb"], "lora": dict(B["lora"]),
    }
    job.update(over)
    return job


def run_variant(job: dict, *, timeout_s: float = 900, python: str | None = None) -> dict:
    """Run one job in a fresh ``python -m azllm.bench`` process and return its result dict.

    Always returns (never raises for the child's failures): ``status`` is ``ok``, ``unavailable``, ``oom``,
    ``timeout`` or ``error``, with ``reason`` for all but ``ok``.
    """
    v = job["variant"]
    with tempfile.TemporaryDirectory(prefix="azllm-bench-") as td:
        jp, rp = Path(td) / "job.json", Path(td) / "result.json"
        jp.write_text(json.dumps(job))
        env = {**os.environ, **CHILD_ENV}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        t0 = time.time()
        try:
            proc = subprocess.run([python or sys.executable, "-m", "azllm.bench", str(jp), str(rp)], env=env,
                                  cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=timeout_s)
            rc, err = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as e:
            rc, err = None, (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        wall = time.time() - t0
        res = json.loads(rp.read_text()) if rp.is_file() else None
    if res is None:
        if rc is None:
            res = {"status": "timeout", "reason": f"no result after {timeout_s:.0f} s"}
        elif rc in (-9, 137):
            res = {"status": "oom", "reason": f"OOM at batch {job['batch']} (seq {job['seq']}): "
                                             "child killed by SIGKILL (kernel OOM killer)"}
        else:
            tail = "\n".join(err.strip().splitlines()[-6:])
            res = {"status": "error", "reason": f"child exited with {rc}: {tail}"}
    res.update(variant=v["name"], batch=job["batch"], seq=job["seq"], wall_s=round(wall, 2), returncode=rc)
    return res


def run_benchmark(P: dict, out_dir: str | os.PathLike | None = None, *, progress: bool = True) -> dict:
    """Run every variant of ``P['benchmark']['variants']`` and return
    ``{"config": shape, "tokens": description, "device": ..., "results": [result, ...]}``, each result carrying
    the memory model's prediction (``predicted``). Also written to ``<out_dir>/benchmark.json``.
    """
    from .utils import progress as tqdm

    from .config import artifacts_dir

    B = P["benchmark"]
    work = artifacts_dir(P) / "bench"
    work.mkdir(parents=True, exist_ok=True)
    ids_path, V, desc = prepare_tokens(P, work)
    cfg = model_shape(P, V)
    device = resolve_device(B["device"])
    results: dict[str, dict] = {}
    rounds = max(1, int(B["rounds"]))
    bar = tqdm(total=rounds * len(B["variants"]), desc="benchmark", disable=not progress)
    for rnd in range(rounds):  # round-robin: a slow spell of a shared machine hits every variant, not one
        for name in B["variants"]:
            bar.set_postfix_str(f"{name} (round {rnd + 1}/{rounds})")
            bar.update(1)
            if name in results and results[name]["status"] != "ok":
                continue  # unavailable / OOM / error: one process says it
            job = make_job(P, name, ids_path, V)
            r = run_variant(job, timeout_s=B["timeout_s"])
            if name not in results:
                v = mem.parse_variant(job["variant"])
                r["predicted"] = mem.predict_memory(cfg, v, job["batch"], job["seq"], device=device)
                r["spec"] = job["variant"]
                r["pids"] = [r.get("pid")]
                results[name] = r
            elif r["status"] == "ok":
                _pool(results[name], r)
            else:
                results[name].setdefault("later_rounds", []).append({"status": r["status"], "reason": r.get("reason")})
    bar.close()
    results = [results[n] for n in B["variants"]]
    out = {"config": cfg, "tokens": desc, "device": device, "batch": B["batch_size"], "seq": B["seq_len"],
           "results": results}
    if B["oom_probe"] and B["oom_probe"].get("variant"):
        out["oom_probe"] = oom_probe(P, ids_path, V, cfg, device)
    if out_dir is not None:
        atomic_write_json(Path(out_dir) / "benchmark.json", out)
    return out


def _pool(acc: dict, r: dict) -> None:
    """Add the windows of another process of the same variant to ``acc`` (same seed and batches: same losses)."""
    for k in ("tokens_per_s", "step_s", "peak_mb", "reserved_mb"):
        if k in r:
            acc[k] = list(acc.get(k) or []) + list(r[k])
    acc["pids"].append(r.get("pid"))
    acc["wall_s"] = acc.get("wall_s", 0) + r.get("wall_s", 0)
    acc["load_end"] = max(x for x in (acc.get("load_end"), r.get("load_end")) if x is not None)
    acc["loss_last_max_diff"] = max(acc.get("loss_last_max_diff", 0.0), abs(acc["loss_last"] - r["loss_last"]))


def oom_probe(P: dict, ids_path, vocab_size: int, cfg: dict, device: str) -> dict:
    """Run ``oom_probe.variant`` under a memory cap (``oom_probe.cap_mb`` above the baseline) at growing batch sizes
    until it runs out of memory: the measured largest batch, next to the fit planner's prediction for that budget.
    """
    spec = P["benchmark"]["oom_probe"]
    rows = []
    for b in spec["batches"]:
        job = make_job(P, spec["variant"], ids_path, vocab_size, batch=int(b), mem_cap_mb=spec["cap_mb"],
                       warmup_steps=2, steps=1, repeats=1)
        r = run_variant(job, timeout_s=P["benchmark"]["timeout_s"])
        rows.append({"batch": int(b), "status": r["status"], "reason": r.get("reason", ""),
                     "peak_mb": _median(r.get("peak_mb")),
                     "predicted_mb": mem.predict_memory(cfg, mem.parse_variant(job["variant"]), int(b), job["seq"],
                                                        device=device)["total"] / MB})
        if r["status"] != "ok":
            break
    v = mem.parse_variant(spec["variant"], dtype=P["benchmark"]["dtype"], lora_r=P["benchmark"]["lora"]["r"],
                          lora_dropout=P["benchmark"]["lora"]["dropout"])
    ok = [r["batch"] for r in rows if r["status"] == "ok"]
    return {"variant": spec["variant"], "cap_mb": spec["cap_mb"], "rows": rows,
            "measured_max_batch": max(ok) if ok else 0,
            "first_oom": next((r["reason"] for r in rows if r["status"] == "oom"), None),
            "planner_max_batch": mem.max_batch(cfg, v, P["benchmark"]["seq_len"], spec["cap_mb"] * MB, device=device)}


def model_shape(P: dict, vocab_size: int) -> dict:
    """The model config of the benchmark as a plain dict (the fields :mod:`azllm.memory` reads)."""
    from .model import model_config

    c = model_config(P["benchmark"]["preset"], vocab_size, **(P["benchmark"]["model"] or {}))
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "head_dim", "vocab_size", "tie_word_embeddings")
    return {k: getattr(c, k, None) for k in keys}


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


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
    name = type(e).__name__
    msg = str(e).lower()
    return name == "OutOfMemoryError" or "out of memory" in msg or "can't allocate memory" in msg or \
        "not enough memory" in msg or "cannot allocate memory" in msg


WARMUP_SHAPE = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                "num_key_value_heads": 1, "head_dim": 8}


def _build(v: mem.Variant, cfg, job: dict, dtype, device: str):
    """Build, quantize, patch, wrap and return ``(model, optimizer, liger_report)`` for variant ``v``.

    Order: build -> quantize -> Liger (it patches the instance, which quantize's reload would lose) -> LoRA (Liger
    before LoRA, see azllm.lora) -> gradient checkpointing. On CUDA the model is created on the device.
    """
    import contextlib

    import torch

    from . import lora as azlora
    from . import model as azmodel

    cuda = device.startswith("cuda")
    with torch.device(device) if cuda else contextlib.nullcontext():
        model = azmodel.build_model(cfg, dtype=dtype, seed=job["seed"])
    if v.quant:
        model = azlora.quantize_model(model, bits=v.quant, double_quant=v.double_quant, compute_dtype=dtype)
    model.config.use_cache = False
    rep = None
    if v.liger:
        rep = azmodel.apply_liger(model, list(v.liger))
        if set(rep.get("applied", [])) != set(v.liger):
            return model, None, rep
    if v.lora:
        model = azlora.apply_lora(model, r=v.lora_r, alpha=job["lora"]["alpha"], dropout=v.lora_dropout,
                                  kbit=bool(v.quant), gradient_checkpointing=v.grad_ckpt)
    elif v.grad_ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model, azlora.make_optimizer(model, v.optimizer, lr=job["lr"]), rep


def _step(model, opt, x) -> float:
    loss = model(input_ids=x, labels=x).loss  # the output (and its logits) is dropped at once, as a trainer does
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def _child(job: dict) -> dict:
    import numpy as np
    import torch

    from . import model as azmodel

    v = mem.parse_variant(job["variant"])
    if job.get("threads"):
        torch.set_num_threads(int(job["threads"]))
    device = resolve_device(job["device"])
    cuda = device.startswith("cuda")
    dtype = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
             "fp16": torch.float16, "float16": torch.float16}[v.dtype]
    res: dict = {"pid": os.getpid(), "device": device, "variant": v.name, "load_start": os.getloadavg()[0]}

    # availability, before anything is built (and before the heavy imports: nothing is measured then)
    if v.liger:
        ok, why = azmodel.liger_available()
        if not ok:
            return {**res, "status": "unavailable", "reason": f"not available on this device: {why}"}
    if cuda and not torch.cuda.is_available():
        return {**res, "status": "unavailable", "reason": "not available on this device: no CUDA device"}

    import transformers  # noqa: F401  (imported before the baseline, like everything any variant may need)

    try:
        import bitsandbytes  # noqa: F401
        import peft  # noqa: F401
    except ImportError:
        pass
    from . import lora as azlora  # noqa: F401

    B, T = int(job["batch"]), int(job["seq"])
    ids = torch.from_numpy(np.load(job["ids_path"]))
    n_steps = job["warmup_steps"] + job["repeats"] * job["steps"]
    span = B * (T + 1)
    if ids.numel() < n_steps * span:  # a bigger batch than the file was made for (OOM probes): cycle the ids
        ids = ids.repeat(math.ceil(n_steps * span / ids.numel()))
    batches = [ids[k * span:(k + 1) * span].view(B, T + 1)[:, :T].contiguous() for k in range(n_steps)]
    del ids
    # code-path warm-up: two steps of a minuscule model of the same variant, so that lazy imports and one-time
    # library state (OpenMP pool, oneDNN, bitsandbytes backend, CUDA context and cuBLAS) land in the baseline
    try:
        wcfg = azmodel.model_config(job["preset"], job["vocab_size"], **{**job["model"], **WARMUP_SHAPE})
        wm, wopt, _ = _build(v, wcfg, {**job, "lora": {**job["lora"]}}, dtype, device)
        if wopt is not None:
            wx = batches[0][:1, :8].to(device)
            for _ in range(2):
                _step(wm, wopt, wx)
        del wm, wopt
    except Exception as e:  # noqa: BLE001 — the real build below reports the error properly
        res["warmup_error"] = f"{type(e).__name__}: {e}"[:300]
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    st = _proc_status()
    res["baseline_mb"] = st["VmRSS"] / MB
    res["hwm_reset"] = reset_peak_rss()
    if cuda:
        torch.cuda.init()
        torch.cuda.reset_peak_memory_stats()
        base_alloc = torch.cuda.memory_allocated()
        res["baseline_mb"] = base_alloc / MB
        res["baseline_rss_mb"] = st["VmRSS"] / MB
    cap = job.get("mem_cap_mb")
    if cap:
        if cuda:
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, (base_alloc + cap * MB) / total))
        else:
            import resource

            lim = st["VmSize"] + int(cap * MB)
            resource.setrlimit(resource.RLIMIT_AS, (lim, resource.RLIM_INFINITY))
        res["mem_cap_mb"] = cap

    torch.manual_seed(job["seed"])
    try:
        t0 = time.time()
        cfg = azmodel.model_config(job["preset"], job["vocab_size"], **job["model"])
        model, opt, rep = _build(v, cfg, job, dtype, device)
        if rep is not None:
            res["liger"] = rep
        if opt is None:
            return {**res, "status": "unavailable", "reason": f"not available on this device: {rep.get('reason')}"}
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()  # build transients (e.g. the bf16 copy QLoRA quantizes) out of "reserved"
            batches = [b_.to(device) for b_ in batches]
        res["params"] = sum(p.numel() for p in model.parameters())
        res["trainable"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
        res["build_s"] = time.time() - t0

        losses, step_times, windows = [], [], []

        def peak_now() -> dict:
            if cuda:
                return {"peak_mb": (torch.cuda.max_memory_allocated() - base_alloc) / MB,
                        "reserved_mb": torch.cuda.max_memory_reserved() / MB}
            return {"peak_mb": _proc_status()["VmHWM"] / MB - res["baseline_mb"]}

        res["warmup_peak_mb"] = None
        for k in range(n_steps):
            w = k - job["warmup_steps"]
            if w >= 0 and w % job["steps"] == 0:  # a window starts: reset the peak
                if cuda:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                else:
                    reset_peak_rss()
                win = {"t0": time.perf_counter(), "steps": []}
            if cuda:
                torch.cuda.synchronize()
            ts = time.perf_counter()
            lv = _step(model, opt, batches[k])
            if cuda:
                torch.cuda.synchronize()
            dt = time.perf_counter() - ts
            losses.append(lv)
            step_times.append(dt)
            if not math.isfinite(lv):
                return {**res, "status": "error", "reason": f"loss is {lv} at step {k}", "losses": losses}
            if w == -1:
                res["warmup_peak_mb"] = peak_now()["peak_mb"]
            if w >= 0:
                win["steps"].append(dt)
                if len(win["steps"]) == job["steps"]:
                    el = time.perf_counter() - win["t0"]
                    windows.append({"tokens_per_s": B * T * job["steps"] / el,
                                    "step_s": float(np.median(win["steps"])), **peak_now()})
    except Exception as e:  # noqa: BLE001 — classified below
        if _is_oom(e):
            return {**res, "status": "oom", "reason": f"OOM at batch {B} (seq {T}): {type(e).__name__}: "
                                                      f"{str(e).splitlines()[0][:200]}"}
        raise
    res.update(status="ok", losses=losses, loss_first=losses[0], loss_last=losses[-1],
               tokens_per_s=[w_["tokens_per_s"] for w_ in windows], step_s=[w_["step_s"] for w_ in windows],
               peak_mb=[w_["peak_mb"] for w_ in windows], total_s=time.time() - t0, load_end=os.getloadavg()[0])
    if cuda:
        res["reserved_mb"] = [w_["reserved_mb"] for w_ in windows]
    return res


def _child_main(job_path: str, result_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    try:
        res = _child(job)
    except Exception as e:  # noqa: BLE001
        res = {"status": "error", "reason": f"{type(e).__name__}: {e}",
               "traceback": traceback.format_exc()[-3000:], "pid": os.getpid()}
    atomic_write_json(result_path, res)
    return 0


# ----------------------------------------------------------------------------------------------- reporting
def _median(xs) -> float | None:
    import statistics

    xs = [x for x in (xs or []) if x is not None]
    return float(statistics.median(xs)) if xs else None


def _spread(xs) -> tuple[float | None, float | None, float | None]:
    xs = [x for x in (xs or []) if x is not None]
    return (_median(xs), min(xs), max(xs)) if xs else (None, None, None)


def summary_table(bench: dict):
    """One row per variant: status, tokens/s and step time and peak memory (median, min, max), loss after N
    steps, and ratios against the ``baseline`` variant (or the first variant that ran)."""
    import pandas as pd

    rows = []
    for r in bench["results"]:
        tps, tmin, tmax = _spread(r.get("tokens_per_s"))
        st, smin, smax = _spread(r.get("step_s"))
        pk, pmin, pmax = _spread(r.get("peak_mb"))
        row = {"variant": r["variant"], "status": r["status"], "tokens/s": tps, "tokens/s min": tmin,
               "tokens/s max": tmax, "step ms": st and st * 1e3, "step ms min": smin and smin * 1e3,
               "step ms max": smax and smax * 1e3, "peak MB": pk, "peak MB min": pmin, "peak MB max": pmax,
               "loss first": r.get("loss_first"), "loss last": r.get("loss_last"),
               "trainable": r.get("trainable"), "load": r.get("load_end"), "note": r.get("reason", "")}
        if r.get("reserved_mb"):
            row["reserved MB"] = _median(r["reserved_mb"])
        rows.append(row)
    df = pd.DataFrame(rows)
    ok = df[df.status == "ok"]
    base = ok[ok.variant == "baseline"] if (ok.variant == "baseline").any() else ok.head(1)
    if len(base):
        df["speed ×"] = df["tokens/s"] / float(base["tokens/s"].iloc[0])
        df["memory ×"] = df["peak MB"] / float(base["peak MB"].iloc[0])
    return df


def prediction_table(bench: dict):
    """Predicted (memory model, by component) next to measured peak, in MiB, for every variant that ran."""
    import pandas as pd

    rows = []
    for r in bench["results"]:
        p = r["predicted"]
        row = {"variant": r["variant"], "status": r["status"]}
        for k in ("weights", "grads", "optimizer", "activations", "logits"):
            row[k] = p[k] / MB
        row["predicted MB"] = p["total"] / MB
        row["measured MB"] = _median(r.get("peak_mb"))
        row["pred/meas"] = row["predicted MB"] / row["measured MB"] if row["measured MB"] else None
        rows.append(row)
    return pd.DataFrame(rows)


def cost_table(bench: dict, price_per_hour: float, label: str = ""):
    """Dollars per 10**9 training tokens per variant at the measured median (and min–max) throughput."""
    import pandas as pd

    rows = []
    for r in bench["results"]:
        m, lo, hi = _spread(r.get("tokens_per_s"))
        rows.append({"variant": r["variant"], "status": r["status"], "tokens/s": m,
                     "$ per 1B tokens": mem.cost_per_billion_tokens(m, price_per_hour) if m else None,
                     "$ (best)": mem.cost_per_billion_tokens(hi, price_per_hour) if hi else None,
                     "$ (worst)": mem.cost_per_billion_tokens(lo, price_per_hour) if lo else None,
                     "days per 1B tokens": 1e9 / m / 86400 if m else None, "price/h": price_per_hour,
                     "instance": label})
    return pd.DataFrame(rows)


def fit_table(P: dict, vocab_size: int | None = None, device: str = "cuda"):
    """The fit planner for every model of ``benchmark.fit`` (presets and user configs) and every variant."""
    import pandas as pd

    from .model import model_config

    F, B = P["benchmark"]["fit"], P["benchmark"]
    V = int(F["vocab_size"] or vocab_size or P["tokenizer"]["vocab_size"])
    models = {p: model_config(p, V) for p in F["presets"]}
    for name, over in (F["configs"] or {}).items():
        over = dict(over)
        models[name] = model_config(over.pop("preset", "1b"), int(over.pop("vocab_size", V)), **over)
    variants = [mem.parse_variant(n, dtype=F["dtype"], lora_r=B["lora"]["r"], lora_dropout=B["lora"]["dropout"])
                for n in F["variants"]]
    frames = []
    for mname, cfg in models.items():
        rows = mem.fit_plan(cfg, variants, F["budgets_gb"], F["seq_lens"], reserve_gb=F["reserve_gb"], device=device)
        for r in rows:
            r["model"] = mname
            r["params (M)"] = mem.parameter_count(cfg)["total"] / 1e6
        frames.append(pd.DataFrame(rows))
    df = pd.concat(frames, ignore_index=True)
    return df[["model", "params (M)"] + [c for c in df.columns if c not in ("model", "params (M)")]]


def plot_bars(df):
    """Bar charts of median tokens/s and peak memory with min–max whiskers; unavailable/OOM variants are shown as
    empty slots labelled with their status."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * len(df) + 1.5))
    y = np.arange(len(df))
    for ax, col, title in ((axes[0], "tokens/s", "tokens/s (median, min–max)"),
                           (axes[1], "peak MB", "peak memory above baseline, MiB (median, min–max)")):
        med = df[col].astype(float).to_numpy()
        lo = med - df[f"{col} min"].astype(float).to_numpy()
        hi = df[f"{col} max"].astype(float).to_numpy() - med
        ax.barh(y, np.nan_to_num(med), xerr=[np.nan_to_num(lo), np.nan_to_num(hi)], capsize=3,
                color=["C0" if s == "ok" else "lightgrey" for s in df.status])
        for yi, (s, m) in enumerate(zip(df.status, med)):
            if s != "ok":
                ax.text(0, yi, f"  {s.replace('unavailable', 'not available on this device')}", va="center",
                        fontsize=8, color="dimgrey")
        ax.set_yticks(y, df.variant)
        ax.invert_yaxis()
        ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_predicted(pred):
    """Measured vs predicted peak memory (MiB) with the ±20% band."""
    import matplotlib.pyplot as plt
    import numpy as np

    d = pred[pred["measured MB"].notna()]
    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.scatter(d["measured MB"], d["predicted MB"])
    for _, r in d.iterrows():
        ax.annotate(r.variant, (r["measured MB"], r["predicted MB"]), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    hi = float(max(d["measured MB"].max(), d["predicted MB"].max())) * 1.1 if len(d) else 1
    xs = np.linspace(0, hi, 10)
    ax.plot(xs, xs, "k-", lw=0.8, label="predicted = measured")
    ax.fill_between(xs, 0.8 * xs, 1.2 * xs, color="grey", alpha=0.2, label="±20%")
    ax.set_xlabel("measured peak above baseline (MiB)")
    ax.set_ylabel("memory model (MiB)")
    ax.legend()
    fig.tight_layout()
    return fig


def record_all(out_dir, bench: dict, summary, pred, cost, fit) -> None:
    """Every number of the report into ``metrics.json`` (section ``benchmark``)."""
    from .report import record

    def recs(df):
        return [{k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
                for row in df.to_dict(orient="records")]

    record(out_dir, "benchmark", {
        "device": bench["device"], "config": bench["config"], "tokens": bench["tokens"], "batch": bench["batch"],
        "seq": bench["seq"], "variants": recs(summary), "predicted_vs_measured": recs(pred), "cost": recs(cost),
        "fit_planner": recs(fit), "oom_probe": bench.get("oom_probe"),
        "n_ok": int((summary.status == "ok").sum()), "n_variants": len(summary),
        "max_abs_pred_error": float((pred["pred/meas"].dropna() - 1).abs().max()) if pred["pred/meas"].notna().any()
        else None,
        "results": [{k: v for k, v in r.items() if k not in ("traceback",)} for r in bench["results"]],
    })


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1], sys.argv[2]))
