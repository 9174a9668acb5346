"""Full training vs LoRA vs QLoRA: the medians and ratios of several rounds of each method.

The runs themselves are the train recipe's, each in a fresh process (:func:`azllm.recipes.benchmark.compare_methods`;
``azllm bench methods PARAMS --rounds 3``); this module summarizes them. Notebook 03 shows one round.
"""

from __future__ import annotations

import statistics

__all__ = ["method_medians"]


def method_medians(runs: dict[str, list[dict]]) -> list[dict]:
    """One row per method over its rounds: median tokens/s and step time, largest peak memory, ratios to full.

    >>> t = {"tokens_per_s": 100.0, "step_time_s": 0.1, "peak_rss_mb": 50.0}
    >>> method_medians({"full": [{"throughput": t, "parameters": {"trainable": 9}}]})[0]["speed_vs_full"]
    1.0
    """
    rows = []
    for m, rs in runs.items():
        t = [x["throughput"] for x in rs]
        row = {
            "method": m,
            "rounds": len(rs),
            "trainable": rs[0]["parameters"]["trainable"],
            "tokens_per_s": statistics.median(x["tokens_per_s"] for x in t),
            "step_time_s": statistics.median(x["step_time_s"] for x in t),
            "peak_rss_mb": max(x["peak_rss_mb"] for x in t),
        }
        if "cuda_max_allocated_mb" in t[0]:
            row["cuda_max_allocated_mb"] = max(x["cuda_max_allocated_mb"] for x in t)
        rows.append(row)
    full = next((r for r in rows if r["method"] == "full"), None)
    for r in rows:
        r["speed_vs_full"] = r["tokens_per_s"] / full["tokens_per_s"] if full else None
        r["memory_vs_full"] = r["peak_rss_mb"] / full["peak_rss_mb"] if full else None
    return rows
