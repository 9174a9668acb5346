"""Figures of the reports (azllm.plots): each figure function draws what it is given (lines, bars, titles), on
results shaped as the recipes return them."""

import matplotlib

matplotlib.use("Agg")

from azllm import plots  # noqa: E402


def _curve(values):
    return [{"step": 10 * i, "loss": v, "bpb": v / 2} for i, v in enumerate(values)]


def test_training_curves_draws_train_and_every_eval_set():
    fig = plots.training_curves(
        {"train": _curve([5, 4, 3]), "eval": {"val": _curve([5, 3]), "x": _curve([6, 4])}}, train_bytes_per_token=3.0
    )
    loss, bpb = fig.axes
    assert [ln.get_label() for ln in loss.lines] == ["train", "val", "x"]
    assert bpb.get_ylabel() == "bits per byte" and len(bpb.lines) == 3


def test_adapt_curves_use_each_runs_set_names():
    runs = [
        {
            "way": w,
            "method": m,
            "az_set": "mine",
            "en_set": "en",
            "curves": {"eval": {"mine": _curve([3, 2]), "en": _curve([1, 1.2])}},
        }
        for w in ("keep", "extend")
        for m in ("full", "lora")
    ]
    fig = plots.adapt_curves(runs)
    assert len(fig.axes[0].lines) == 4 and "mine" in fig.axes[0].get_title()
    assert {ln.get_linestyle() for ln in fig.axes[1].lines} == {"-", "--"}


def test_method_bars_one_bar_per_method():
    rows = [{"method": m, "tokens_per_s": t, "peak_rss_mb": 100.0} for m, t in (("full", 10.0), ("lora", 20.0))]
    fig = plots.method_bars(rows)
    assert [p.get_height() for p in fig.axes[0].patches] == [10.0, 20.0]


def test_fertility_vs_vocab_and_best_vs_baselines():
    rows = [
        {
            "tokenizer": f"bpe-{v // 1000}k",
            "eval_set": "f",
            "vocab_size": v,
            "fertility": f,
            "model_type": "bpe",
            "affix_presplit": False,
            "roundtrip": 1.0,
        }
        for v, f in ((8000, 1.8), (16000, 1.6))
    ]
    rows.append({"tokenizer": "gpt2", "eval_set": "f", "vocab_size": 50257, "fertility": 4.9, "roundtrip": 1.0})
    assert plots.fertility_vs_vocab(rows, "f", trained={"bpe-8k", "bpe-16k"}).axes
    fig = plots.best_vs_baselines(rows, "f", ["bpe-16k", "gpt2"], highlight="bpe-16k")
    assert len(fig.axes[0].patches) == 2
