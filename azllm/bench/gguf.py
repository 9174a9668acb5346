"""Speed of a GGUF file with llama.cpp against the same model with transformers, on the same CPU: prompt (prefill)
and generation tokens/s and peak RSS, each side in a fresh process (:func:`azllm.bench.process.run_fresh`), the
same prompt ids on both sides, medians of ``repeats`` rounds after one warm-up round (``azllm deploy``, notebook
08). Generation always runs ``gen_tokens`` greedy steps (EOS ignored); llama.cpp computes only the last position's
logits, as in serving; transformers runs in fp32 with its KV cache.

>>> speed("model-Q4_K_M.gguf", threads=2)["gen_tokens_per_s"]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..deploy import gguf_fields
from ..gguf_quality import logits_model
from ..gguf_runtime import llama_log, require_llama_cpp

__all__ = ["speed", "hf_speed"]


def _speed_job(job: dict) -> dict:
    """In a fresh process: load, then time the prefill and the greedy steps (EOS ignored: always ``gen_tokens``) of
    llama.cpp (only the last position's logits, as in serving) or of transformers (fp32, KV cache); medians of
    ``repeats`` rounds after one warm-up round."""
    from statistics import median

    from ..utils import peak_rss_mb

    t0, state = time.time(), {}
    if job["kind"] == "llama":
        import numpy as np

        api = require_llama_cpp()
        llm = logits_model(job["path"], len(job["ids"]) + job["gen_tokens"] + 8, job["threads"], logits_all=False)

        def run(ids, first=True):
            if first:
                llm.reset()
            llm.eval(ids)
            return int(np.ctypeslib.as_array(api.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),)).argmax())

        quiet = llama_log()
    else:
        import torch
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(job["threads"])
        model = AutoModelForCausalLM.from_pretrained(job["path"], dtype=torch.float32).eval()

        def run(ids, first=True):
            out = model(torch.tensor([ids]), past_key_values=None if first else state["past"], use_cache=True)
            state["past"] = out.past_key_values
            return int(out.logits[0, -1].argmax())

        quiet = torch.no_grad()
    load, pre, gen = time.time() - t0, [], []
    with quiet:
        for r in range(job["repeats"] + 1):
            t1 = time.perf_counter()
            nxt = run(job["ids"])
            t2 = time.perf_counter()
            for _ in range(job["gen_tokens"]):
                nxt = run([nxt], first=False)
            if r:
                pre.append(len(job["ids"]) / (t2 - t1))
                gen.append(job["gen_tokens"] / (time.perf_counter() - t2))
    res = {"prefill_tokens_per_s": round(median(pre), 1), "gen_tokens_per_s": round(median(gen), 1)}
    return res | {"load_s": round(load, 2), "peak_rss_mb": round(peak_rss_mb(), 1)}


def _fresh_speed(kind: str, path, vocab_size: int, ids, prompt_tokens, gen_tokens, threads, repeats) -> dict:
    from .process import ok_or_raise, run_fresh

    if ids is None:  # deterministic ids spread over the vocabulary, past the first (special) ones
        lo = min(1000, vocab_size // 4)
        ids = [lo + (i * 7919) % (vocab_size - lo) for i in range(prompt_tokens)]
    job = {"kind": kind, "path": str(path), "ids": list(ids), "gen_tokens": gen_tokens, "threads": threads}
    env = {"OMP_NUM_THREADS": str(threads)}
    res = ok_or_raise(run_fresh("azllm.bench.gguf:_speed_job", job | {"repeats": repeats}, env=env), f"speed of {path}")
    keep = ("prefill_tokens_per_s", "gen_tokens_per_s", "load_s", "peak_rss_mb")
    return {k: res[k] for k in keep} | {"prompt_tokens": len(ids), "gen_tokens": gen_tokens, "threads": threads}


def speed(gguf_file, *, prompt_tokens=128, gen_tokens=32, threads=2, repeats=3, prompt_ids=None) -> dict:
    """llama.cpp's prefill and generation tokens/s (medians of ``repeats`` after one warm-up) and peak RSS, in a
    fresh process (:func:`azllm.bench.process.run_fresh`). ``prompt_ids``: the prompt (else deterministic ids of
    the vocabulary); give :func:`hf_speed` the same.

    >>> speed("model-Q4_K_M.gguf")["gen_tokens_per_s"]  # doctest: +SKIP
    """
    vocab = gguf_fields(Path(gguf_file))["n_tokens"]
    return _fresh_speed("llama", gguf_file, vocab, prompt_ids, prompt_tokens, gen_tokens, threads, repeats)


def hf_speed(model_folder, *, prompt_tokens=128, gen_tokens=32, threads=2, repeats=3, prompt_ids=None) -> dict:
    """:func:`speed` for the transformers model of ``model_folder`` (fp32, KV cache, greedy steps).

    >>> hf_speed("artifacts/sft_export")["prefill_tokens_per_s"]  # doctest: +SKIP
    """
    vocab = json.loads((Path(model_folder) / "config.json").read_text())["vocab_size"]
    return _fresh_speed("transformers", model_folder, vocab, prompt_ids, prompt_tokens, gen_tokens, threads, repeats)
