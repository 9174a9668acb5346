"""The token-file encoder benchmark: how fast and how lean :func:`azllm.tokens.encode_corpus` is, side by side.

Variants, each in a fresh process (:func:`azllm.bench.process.run_fresh`), each at 1x and ``scale``x the corpus
(the corpus file read ``scale`` times over, never held in memory):

- ``a``: the naive approach: encode every document, append the ids to one Python list, save at the end;
- ``b``: encode each document and append it to the file at once (``tofile``), one process;
- ``c``: :func:`azllm.tokens.encode_corpus` (chunks, encoding threads, atomic files);
- ``limit``: the tokenizer's own batch encode on all cores, documents in memory, nothing written;
- ``limit_1thread``: the same, one document at a time on one thread;
- ``hf_batch``: for a folder with ``sp.model``, the folder's HF ``tokenizers`` backend (a quarter of the corpus).

Decisions: the corpus is normalized once, up front, into ``workdir/corpus.txt``: ``encode_corpus`` takes
normalized documents, and normalizing costs every variant the same. (a), (b) and the limits use the SentencePiece
model of the folder (same ids as the folder's ``tokenizer.json``, which (c) gets and maps to the same engine).
Peak RSS is each child's own high-water mark (``VmHWM``); ``rss_growth_mb`` subtracts the mark after imports.
Tokens per CPU-second is recorded too: wall-clock throughput depends on what else runs on the machine.
``get_batch`` is timed against one training step (forward, backward, AdamW) of a small Llama (hidden 128,
2 layers, 4 heads) on the same batches.

Command line: ``azllm bench encoder PARAMS [--quick]`` (:mod:`azllm.recipes.tokens`) prints the table.
"""

from __future__ import annotations

import itertools
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..tokens import TokenFile, encode_corpus, token_dtype
from ..utils import atomic_write_json, machine_info, peak_rss_mb, progress
from .process import ok_or_raise, run_fresh

__all__ = ["benchmark", "measure_encoder", "get_batch_timing", "variant_rows"]

_LIMITS = ("limit", "limit_1thread", "hf_batch")
_MEDIANS = (
    "tokens_per_s",
    "seconds",
    "peak_rss_mb",
    "base_rss_mb",
    "rss_growth_mb",
    "tokens",
    "cpu_seconds",
    "tokens_per_cpu_s",
)


# ------------------------------------------------------------------------------------------------ child side


def _stream_docs(path: str, scale: int) -> Iterator[str]:
    """The documents of a one-document-per-line file, ``scale`` times over, read lazily."""
    for _ in range(scale):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if line:
                    yield line


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _encode_limit(job: dict, docs: Iterator[str]) -> dict:
    """Encode only: the tokenizer's batch encode (or one document at a time), ``inner`` times; median time."""
    from ..tokenizer import load_tokenizer

    tok = load_tokenizer(job["encoder_tokenizer"] if job["variant"] == "hf_batch" else job["tokenizer"])
    texts = list(itertools.islice(docs, job.get("max_docs") or None))
    fn = tok.encode_batch
    if job["variant"] == "limit_1thread":
        fn = lambda ts: [tok.encode(t) for t in ts]  # noqa: E731
    base = peak_rss_mb()
    times = []
    for _ in range(int(job.get("inner", 2))):
        t0 = time.perf_counter()
        ids = fn(texts)
        times.append(time.perf_counter() - t0)
    return {"tokens": sum(map(len, ids)) + len(ids), "seconds": float(np.median(times)), "base": base}


def _encode_write(job: dict, docs: Iterator[str]) -> dict:
    """Encode and write: variant a, b or c."""
    from ..tokenizer import load_tokenizer

    variant, out = job["variant"], Path(job["out"])
    tok = load_tokenizer(job["encoder_tokenizer"] if variant == "c" else job["tokenizer"])
    eos, dtype = tok.eos_id, token_dtype(tok.vocab_size)
    res = {"base": peak_rss_mb()}
    t0 = time.perf_counter()
    if variant == "a":  # naive: one growing Python list, saved at the end
        ids: list[int] = []
        for d in docs:
            ids.extend(tok.encode(d))
            ids.append(eos)
        np.array(ids, dtype=dtype).tofile(out)
        n = len(ids)
    elif variant == "b":  # per-document encode, appended to the file at once
        n = 0
        with open(out, "wb") as f:
            for d in docs:
                a = np.array(tok.encode(d) + [eos], dtype=dtype)
                a.tofile(f)
                n += a.size
    elif variant == "c":
        r = encode_corpus(docs, tok, out, val_fraction=0.01, progress=False, force=True)
        n = r["train_tokens"] + r["val_tokens"]
        res["backend"] = r["backend"]
    else:
        raise ValueError(f"unknown benchmark variant {variant!r}")
    res.update(tokens=n, seconds=time.perf_counter() - t0)
    return res


def measure_encoder(job: dict) -> dict:
    """One measurement (the fresh-process target): tokens, seconds, peak RSS, CPU seconds."""
    docs = _stream_docs(job["corpus"], int(job["scale"]))
    cpu0 = _cpu_seconds()
    res = (_encode_limit if job["variant"] in _LIMITS else _encode_write)(job, docs)
    base = res.pop("base")
    # Linux's RSS counters are cached per thread and synced lazily, so a later VmHWM read can come out a few KB under
    # an earlier one (seen: 1793.89 after 1793.93 MiB); the peak of the window is at least its start
    res.update(peak_rss_mb=max(peak_rss_mb(), base), base_rss_mb=base, cpu_seconds=_cpu_seconds() - cpu0)
    res["rss_growth_mb"] = res["peak_rss_mb"] - base
    res["tokens_per_s"] = res["tokens"] / max(res["seconds"], 1e-9)
    inner = int(job.get("inner", 2)) if job["variant"] in _LIMITS else 1
    res["tokens_per_cpu_s"] = res["tokens"] * inner / max(res["cpu_seconds"], 1e-9)
    return res


def get_batch_timing(train_bin: Path, vocab_size: int, batch_size: int, block_size: int, steps: int) -> dict:
    """``get_batch`` batches/s vs one training step (fwd + bwd + AdamW) of a small Llama on the same batches."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tf = TokenFile(train_bin)
    g = torch.Generator().manual_seed(0)
    for _ in range(10):
        tf.get_batch(batch_size, block_size, g)
    n = max(200, steps * 20)
    t0 = time.perf_counter()
    for _ in range(n):
        tf.get_batch(batch_size, block_size, g)
    gb = (time.perf_counter() - t0) / n
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=block_size,
    )
    model = LlamaForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    for i in range(steps + 2):
        x, _ = tf.get_batch(batch_size, block_size, g)
        t0 = time.perf_counter()
        model(input_ids=x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= 2:  # warm-up
            times.append(time.perf_counter() - t0)
    step = float(np.median(times))
    return {
        "get_batch_ms": gb * 1e3,
        "batches_per_s": 1 / gb,
        "batch_tokens_per_s": batch_size * block_size / gb,
        "train_step_ms": step * 1e3,
        "get_batch_share_of_step": gb / step,
        "model": f"LlamaForCausalLM hidden 128, 2 layers, 4 heads, vocab {vocab_size}, "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params",
        "batch_size": batch_size,
        "block_size": block_size,
        "torch_threads": torch.get_num_threads(),
    }


# ----------------------------------------------------------------------------------------------- parent side


def _normalized_copy(resolved, path: Path) -> tuple[int, int]:
    """Normalize the source once into a one-document-per-line file; returns ``(documents, characters)``."""
    from ..data import iter_documents

    tmp = path.with_suffix(".txt.tmp")
    n_docs = n_chars = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for d in iter_documents(resolved):
            f.write(d.replace("\n", " ") + "\n")
            n_docs += 1
            n_chars += len(d)
    os.replace(tmp, path)
    return n_docs, n_chars


def _jobs(tokenizer_path: Path, corpus: Path, workdir: Path, scale: int, n_docs: int, hf_batch: bool) -> list:
    sp_spec = str(tokenizer_path / "sp.model") if (tokenizer_path / "sp.model").is_file() else str(tokenizer_path)
    base = {"tokenizer": sp_spec, "encoder_tokenizer": str(tokenizer_path), "corpus": str(corpus)}
    pairs = [("limit", 1), ("limit_1thread", 1)] + [(v, s) for s in (1, scale) for v in ("a", "b", "c")]
    if hf_batch and sp_spec != str(tokenizer_path):
        pairs.append(("hf_batch", 1))
    jobs = []
    for v, s in pairs:
        job = {**base, "variant": v, "scale": s, "out": str(workdir / f"out_{v}_{s}")}
        if v == "hf_batch":
            job.update(max_docs=max(1, n_docs // 4), inner=1)  # HF Unigram is slow: a quarter of the corpus
        if v == "c":
            job["out"] = str(workdir / f"tokens_{s}")
        jobs.append(job)
    return jobs


def _medians(runs: dict[str, list[dict]]) -> dict:
    med = {}
    for k, rs in runs.items():
        med[k] = {m: float(np.median([r[m] for r in rs])) for m in _MEDIANS}
        med[k]["runs"] = len(rs)
        if "backend" in rs[0]:
            med[k]["backend"] = rs[0]["backend"]
    return med


def _ratios(med: dict, scale: int) -> dict:
    tps = {k: v["tokens_per_s"] for k, v in med.items()}
    lim = tps["limit@1"]
    out = {
        "c_over_limit_1x": tps["c@1"] / lim,
        f"c_over_limit_{scale}x": tps[f"c@{scale}"] / lim,
        "c_over_a_1x": tps["c@1"] / tps["a@1"],
        f"c_over_a_{scale}x": tps[f"c@{scale}"] / tps[f"a@{scale}"],
        "b_over_a_1x": tps["b@1"] / tps["a@1"],
        "limit_over_a_1x": lim / tps["a@1"],
        "limit_over_1thread": lim / tps["limit_1thread@1"],
    }
    for v in "abc":
        out[f"{v}_rss_growth_1x_to_nx_mb"] = med[f"{v}@{scale}"]["peak_rss_mb"] - med[f"{v}@1"]["peak_rss_mb"]
    if "hf_batch@1" in tps:
        out["sentencepiece_over_hf_batch"] = lim / tps["hf_batch@1"]
    return out


def variant_rows(med: dict, scale: int) -> list[dict]:
    """One row per encoder and corpus scale of the medians (``{"<variant>@<scale>": medians}``): the variant and
    the scale as values, the medians, millions of tokens per second (and per CPU-second), and the speed against
    the limit (``limit`` at 1x) and against the naive list (``a``) at the same scale."""
    rows = []
    lim = med["limit@1"]["tokens_per_s"]
    a = {s: med.get(f"a@{s}", {}).get("tokens_per_s") for s in (1, scale)}
    for k, m in med.items():
        v, s = k.split("@")
        rows.append(
            {
                "variant": v,
                "scale": int(s),
                **m,
                "tokens": int(m["tokens"]),
                "mtokens_per_s": m["tokens_per_s"] / 1e6,
                "vs_limit": m["tokens_per_s"] / lim,
                "vs_a": m["tokens_per_s"] / a[int(s)] if a.get(int(s)) else None,
                "mtokens_per_cpu_s": m["tokens_per_cpu_s"] / 1e6,
            }
        )
    return rows


def benchmark(
    resolved,
    tokenizer_path: str | os.PathLike,
    workdir: str | os.PathLike,
    *,
    scale: int,
    rounds: int,
    batch_size: int,
    block_size: int,
    train_steps: int,
    hf_batch: bool = True,
    out_json: str | os.PathLike | None = None,
    show_progress: bool = True,
) -> dict:
    """Measure the encoders side by side in ``rounds`` interleaved rounds of fresh processes (medians).

    Returns ``{"variants": {"<v>@<scale>": medians}, "rows" (:func:`variant_rows`), "ratios", "get_batch",
    "targets", "corpus", "machine", ...}``.

    >>> res = benchmark(resolved, "artifacts/default/tokenizer", "artifacts/default/bench", scale=10,
    ...                 rounds=3, batch_size=8, block_size=256, train_steps=10)  # doctest: +SKIP
    """
    workdir, tpath = Path(workdir), Path(tokenizer_path)
    workdir.mkdir(parents=True, exist_ok=True)
    n_docs, n_chars = _normalized_copy(resolved, workdir / "corpus.txt")
    jobs = _jobs(tpath, workdir / "corpus.txt", workdir, scale, n_docs, hf_batch)
    runs: dict[str, list[dict]] = {}
    load_before = os.getloadavg()[0]
    bar = progress(total=len(jobs) * rounds, desc="encoder benchmark", unit="run", disable=not show_progress)
    for _ in range(rounds):
        for job in jobs:
            res = ok_or_raise(
                run_fresh("azllm.bench.encoder:measure_encoder", job), f"encoder benchmark {job['variant']}"
            )
            runs.setdefault(f"{job['variant']}@{job['scale']}", []).append(res)
            bar.update(1)
    bar.close()
    med = _medians(runs)
    ratios = _ratios(med, scale)
    tf = TokenFile(workdir / "tokens_1" / "train.bin")
    gb = get_batch_timing(tf.path, tf.vocab_size, batch_size, block_size, train_steps)
    gb["batch_mtokens_per_s"] = gb["batch_tokens_per_s"] / 1e6
    res = {
        "variants": med,
        "rows": variant_rows(med, scale),
        "ratios": ratios,
        "get_batch": gb,
        "scale": scale,
        "rounds": rounds,
        "corpus": {
            "documents": n_docs,
            "characters": n_chars,
            "tokens": int(med["c@1"]["tokens"]),
            "source": resolved.describe(),
        },
        "targets": {
            "c_over_limit_at_least_0_85": ratios["c_over_limit_1x"] >= 0.85,
            "c_rss_growth_under_64_mb": ratios["c_rss_growth_1x_to_nx_mb"] < 64,
            "get_batch_under_1pct_of_step": gb["get_batch_share_of_step"] < 0.01,
        },
        "machine": machine_info(),
        "tokenizer": str(tpath),
        # 1-minute load average before and after the runs: above the core count, other jobs shared the CPUs
        "load_avg_1min": [load_before, os.getloadavg()[0]],
    }
    if out_json:
        atomic_write_json(out_json, res)
    return res
