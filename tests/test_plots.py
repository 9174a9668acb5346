"""Figures of the reports (azllm.plots): each figure function draws what it is given (lines, bars, titles), on
results shaped as the recipes return them."""

import matplotlib

matplotlib.use("Agg")

from azllm import plots  # noqa: E402


def _curve(values):
    return [{"step": 10 * i, "loss": v, "bpb": v / 2} for i, v in enumerate(values)]


def test_training_curves_draws_train_and_every_eval_set():
    train = [{**p, "bpb_approx": p["loss"] / 3} for p in _curve([5, 4, 3])]  # as azllm.recipes.train.curves
    fig = plots.training_curves({"train": train, "eval": {"val": _curve([5, 3]), "x": _curve([6, 4])}})
    loss, bpb = fig.axes
    assert [ln.get_label() for ln in loss.lines] == ["train", "val", "x"]
    assert bpb.get_ylabel() == "bits per byte" and len(bpb.lines) == 3
    assert list(bpb.lines[0].get_ydata()) == [p["bpb_approx"] for p in train]  # drawn as given


def test_benchmark_figures_draw_the_recipes_rows():
    """variant_bars, predicted_vs_measured, corpus_removed and encoder_throughput take the recipes' rows (every
    number computed there) and draw them; a variant that did not run is an empty, labelled slot."""
    rows = [
        {
            "variant": "baseline",
            "status": "ok",
            **{f"tokens_per_s_{k}": v for k, v in (("median", 100.0), ("min", 90.0), ("max", 110.0))},
            **{f"peak_mb_{k}": v for k, v in (("median", 50.0), ("min", 48.0), ("max", 52.0))},
        },
        {
            "variant": "liger",
            "status": "unavailable",
            **{f"{m}_{k}": None for m in ("tokens_per_s", "peak_mb") for k in ("median", "min", "max")},
        },
    ]
    fig = plots.variant_bars(rows)
    assert [p.get_width() for p in fig.axes[0].patches] == [100.0, 0.0]
    pred = [
        {"variant": "baseline", "measured_mb": 50.0, "predicted_mb": 45.0},
        {"variant": "liger", "measured_mb": None},
    ]
    assert len(plots.predicted_vs_measured(pred).axes[0].collections[0].get_offsets()) == 1
    removed = [
        {"source": s, "mb": {"input": i, "quality": 1.0, "kept": i - 1.0, "kept_pct": 50.0}}
        for s, i in (("news", 3.0), ("total", 5.0))
    ]
    assert [p.get_width() for p in plots.corpus_removed(removed).axes[0].patches] == [2.0, 1.0]
    enc = {
        "scale": 10,
        "variants": [
            {"variant": v, "scale": s, "mtokens_per_s": 1.0, "peak_rss_mb": 10.0}
            for v in ("a", "b", "c", "limit")
            for s in (1, 10)
        ],
    }
    assert len(plots.encoder_throughput(enc).axes[0].patches) == 6


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


def test_fertility_vs_morph_joins_the_frontier_only():
    points = [
        {"name": "bpe", "kind": "one change", "fertility": 1.44, "morph_recall": 15.0, "on_frontier": True},
        {"name": "affix", "kind": "sweep", "fertility": 1.85, "morph_recall": 52.0, "on_frontier": True},
        {"name": "unigram", "kind": "one change", "fertility": 1.50, "morph_recall": 14.0, "on_frontier": False},
    ]
    ax = plots.fertility_vs_morph(points, "flores", target=1.4).axes[0]
    frontier = next(line for line in ax.lines if line.get_label() == "frontier")
    assert list(frontier.get_xdata()) == [15.0, 52.0] and list(frontier.get_ydata()) == [1.44, 1.85]
    assert [c.get_offsets().shape[0] for c in ax.collections] == [2, 1]  # one change, sweep
    assert any(line.get_label() == "target 1.40" for line in ax.lines)
