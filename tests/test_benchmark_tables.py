"""azllm.benchmark_tables: the training benchmark's tables and notes (variants, the planner's error in words, the
fit plan) with display labels, the numbers kept as measured."""

from azllm import benchmark_tables


def test_variant_table_renames_and_keeps_the_numbers():
    rows = [
        {
            "variant": "baseline",
            "status": "ok",
            "tokens_per_s_median": 100.0,
            "tokens_per_s_min": 90,
            "tokens_per_s_max": 110,
            "speed_ratio": 1.0,
            "memory_ratio": 1.0,
            "reserved_mb_median": None,
            "note": "",
        },
        {"variant": "liger", "status": "unavailable", "note": "not available on this device: no CUDA"},
    ]
    df = benchmark_tables.variant_table(rows)
    assert list(df.columns[:6]) == ["variant", "status", "tokens/s", "tokens/s min", "tokens/s max", "speed ×"]
    assert df.loc[0, "tokens/s"] == 100.0 and "reserved MB" not in df  # measured nowhere: not shown
    assert (
        benchmark_tables.variant_notes(rows)
        == "**Not run here:**\n\n- `liger`: unavailable — not available on this device: no CUDA"
    )
    assert benchmark_tables.variant_notes(rows[:1]) == ""


def test_prediction_notes_are_the_summary_in_words():
    summary = {
        "n_measured": 2,
        "max_rel_pred_error": 0.05,
        "baseline": {"logits_mb": 30.0, "predicted_mb": 100.0, "logits_share": 0.3, "weights_optimizer_share": 0.4},
    }
    first, second = benchmark_tables.prediction_notes(summary)
    assert first == "largest relative error over 2 measured variants: 5.0%"
    assert "is 30% of the predicted peak (30 of 100 MiB)" in second and "states are 40%" in second
    assert benchmark_tables.prediction_notes({"n_measured": 0, "max_rel_pred_error": None}) == [
        "largest relative error over 0 measured variants: none measured"
    ]


def test_fit_table_labels_its_columns():
    fit = benchmark_tables.fit_table([{"model": "tiny", "params_m": 1.5, "variant": "baseline", "batch_at_256": 8}])
    assert list(fit.columns) == ["model", "params (M)", "variant", "batch@256"]
    assert fit.loc[0, "batch@256"] == 8
