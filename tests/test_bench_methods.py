"""Full vs LoRA vs QLoRA summaries (azllm.bench.methods): medians over rounds, the largest peak, ratios to full."""

import pytest

from azllm.bench.methods import method_medians


def _run(tps, step, peak, trainable=10):
    return {
        "throughput": {"tokens_per_s": tps, "step_time_s": step, "peak_rss_mb": peak},
        "parameters": {"trainable": trainable},
    }


def test_medians_largest_peak_and_ratios():
    rows = method_medians(
        {
            "full": [_run(100, 0.2, 50), _run(300, 0.1, 70), _run(200, 0.3, 60)],
            "lora": [_run(150, 0.1, 35, trainable=2)],
        }
    )
    full, lora = rows
    assert (full["tokens_per_s"], full["step_time_s"], full["peak_rss_mb"], full["rounds"]) == (200, 0.2, 70, 3)
    assert lora["speed_vs_full"] == pytest.approx(0.75) and lora["memory_vs_full"] == pytest.approx(0.5)
    assert lora["trainable"] == 2


def test_without_full_there_is_no_ratio():
    (row,) = method_medians({"qlora": [_run(10, 1.0, 5)]})
    assert row["speed_vs_full"] is None and row["memory_vs_full"] is None
