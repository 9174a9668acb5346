"""How fast scoring is: items per second of one multiple-choice task through lm-eval (:func:`azllm.evaluation.
harness.score`), batched vs one request at a time, each round in a fresh process (:mod:`azllm.bench.process`),
the variants round-robin, medians and their ratio.

Batched scoring is lm-eval's: requests sorted by length, one forward pass per batch, and the options of one item that
share a context grouped (``HFLM`` computes a shared context once per group when the options' continuations are
short). ``batch_size=1`` is the unbatched reference.

>>> res = benchmark("artifacts/default/adapt/extend-lora-export", task_config, rounds=3)  # doctest: +SKIP
>>> res["ratio"]  # doctest: +SKIP
"""

from __future__ import annotations

import statistics
import time

__all__ = ["measure_scoring", "benchmark"]


def measure_scoring(job: dict) -> dict:
    """One measurement (run in a fresh process): load the model folder, score the task config once untimed
    (lm-eval's first call builds its task objects), then once timed; items per second of the timed call."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..evaluation.harness import score
    from ..evaluation.tasks import local_task

    torch.set_num_threads(job.get("threads") or torch.get_num_threads())
    model = AutoModelForCausalLM.from_pretrained(job["model"]).eval()
    tok = AutoTokenizer.from_pretrained(job["model"])
    configs = local_task(job["task"], **job["task_args"])
    score(model, tok, configs, batch_size=job["batch_size"], bootstrap_iters=1)
    t0 = time.perf_counter()
    res = score(model, tok, configs, batch_size=job["batch_size"], bootstrap_iters=1)
    seconds = time.perf_counter() - t0
    n = sum(t["n"] for k, t in res["tasks"].items())
    return {"items": n, "seconds": seconds, "items_per_s": n / seconds, "batch_size": job["batch_size"]}


def benchmark(
    model: str,
    task: str,
    task_args: dict,
    *,
    batch_sizes: tuple[int, ...] = (1, 16),
    rounds: int = 3,
    threads: int | None = None,
    timeout_s: float = 1800,
) -> dict:
    """Items per second of ``task`` (a local task name and :func:`~azllm.evaluation.tasks.local_task` arguments) on
    the model folder ``model`` at each batch size: ``rounds`` fresh processes each, round-robin; returns the
    per-round rows, the median per batch size and the ratio of the largest batch size's median to the first's."""
    import os

    from .process import load_warning, ok_or_raise, run_fresh

    rows, loads = [], []
    for r in range(rounds):
        order = list(batch_sizes) if r % 2 == 0 else list(reversed(batch_sizes))
        for bs in order:
            job = {"model": str(model), "task": task, "task_args": task_args, "batch_size": bs, "threads": threads}
            start = os.getloadavg()[0]
            res = ok_or_raise(
                run_fresh("azllm.bench.evaluation:measure_scoring", job, timeout_s=timeout_s),
                f"scoring {task} at batch size {bs}",
            )
            loads += [start, os.getloadavg()[0]]
            rows.append(
                {
                    "round": r,
                    "batch_size": bs,
                    "items": res["items"],
                    "seconds": res["seconds"],
                    "items_per_s": res["items_per_s"],
                    "load_start": round(start, 2),
                    "load_end": round(loads[-1], 2),
                }
            )
    medians = {bs: statistics.median(x["items_per_s"] for x in rows if x["batch_size"] == bs) for bs in batch_sizes}
    return {
        "rows": rows,
        "medians": medians,
        "ratio": medians[batch_sizes[-1]] / medians[batch_sizes[0]],
        "task": task,
        "rounds": rounds,
        **load_warning(loads),
    }
