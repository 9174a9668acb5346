"""Matplotlib figures of the reports. Each function takes the recipes' results (plain rows or dicts, snake_case
keys, every number computed by the recipe) and returns a Figure; what is computed here is the drawing itself."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = [
    "corpus_removed",
    "adapt_curves",
    "fertility_vs_vocab",
    "best_vs_baselines",
    "fertility_vs_morph",
    "training_curves",
    "method_bars",
    "encoder_throughput",
    "variant_bars",
    "predicted_vs_measured",
    "gain_vs_loss",
    "genre_shares",
]


def fertility_vs_vocab(rows: list[dict], eval_set: str, metric: str = "fertility", trained: set[str] | None = None):
    """Lines of ``metric`` against vocabulary size, one line per (model type, affix pre-split)."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    series: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if r["eval_set"] != eval_set or (trained is not None and r["tokenizer"] not in trained):
            continue
        parts = r["tokenizer"].split("-")
        key = parts[0] + (" + affix pre-split" if r["tokenizer"].endswith("-affix") else "")
        series.setdefault(key, []).append((r["vocab_size"], r[metric]))
    for key, pts in sorted(series.items()):
        pts.sort()
        ax.plot(
            [p[0] for p in pts], [p[1] for p in pts], marker="o", label=key, linestyle="--" if "affix" in key else "-"
        )
    ax.set_xscale("log", base=2)
    xs = sorted({p[0] for pts in series.values() for p in pts})
    ax.set_xticks(xs, [f"{x // 1000}k" if x >= 1000 else str(x) for x in xs])
    ax.set_xlabel("vocabulary size")
    ax.set_ylabel(metric.replace("_", " "))
    ax.set_title(
        f"{metric.replace('_', ' ')} on {eval_set} (lower is better)"
        if metric == "fertility"
        else f"{metric.replace('_', ' ')} on {eval_set}"
    )
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def fertility_vs_morph(points: list[dict], eval_set: str, target: float | None = None):
    """Tokens per word against morphology recall, one point per tokenizer of
    :func:`azllm.recipes.tokenizers.frontier_points`; the frontier (no point both fewer tokens and more recall)
    joined by a line, the target as a dashed line."""
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    for kind, marker in (("one change", "o"), ("sweep", "s")):
        pts = [p for p in points if p["kind"] == kind]
        ax.scatter(
            [p["morph_recall"] for p in pts], [p["fertility"] for p in pts], marker=marker, label=kind, alpha=0.7
        )
    front = sorted((p for p in points if p["on_frontier"]), key=lambda p: p["morph_recall"])
    ax.plot([p["morph_recall"] for p in front], [p["fertility"] for p in front], color="black", lw=1, label="frontier")
    for p in front:
        ax.annotate(
            p["name"], (p["morph_recall"], p["fertility"]), fontsize=7, xytext=(4, 2), textcoords="offset points"
        )
    if target is not None:
        ax.axhline(target, ls="--", color="grey", lw=1, label=f"target {target:.2f}")
    ax.set_xlabel(f"morphology recall on {eval_set} words (higher: cuts at suffix boundaries)")
    ax.set_ylabel(f"tokens per word on {eval_set}")
    ax.set_title("what fewer tokens cost in morphology")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def best_vs_baselines(
    rows: list[dict],
    eval_set: str,
    names: list[str],
    highlight: str | None = None,
    metric: str = "fertility",
    target: float | None = None,
):
    """Horizontal bars of ``metric`` for the named tokenizers, sorted, ``highlight`` in another colour."""
    vals = {r["tokenizer"]: r[metric] for r in rows if r["eval_set"] == eval_set and r["tokenizer"] in names}
    order = sorted(vals, key=vals.get)
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(order) + 1.2))
    colors = ["tab:orange" if n == highlight else "tab:blue" for n in order]
    ax.barh(order, [vals[n] for n in order], color=colors)
    for i, n in enumerate(order):
        ax.text(vals[n], i, f" {vals[n]:.2f}", va="center")
    if target is not None:
        ax.axvline(target, color="tab:red", linestyle="--", label=f"target {target}")
        ax.legend(loc="lower right")
    ax.invert_yaxis()
    ax.set_xlabel(f"{metric.replace('_', ' ')} on {eval_set}")
    ax.set_title(f"Tokens per word on {eval_set}: trained vs baselines" if metric == "fertility" else metric)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def training_curves(curves: dict):
    """Loss and bits per byte against steps: the logged training loss and every evaluated set
    (:func:`azllm.recipes.train.curves`: the training bpb is approximate, ``bpb_approx``; the evaluations' is
    exact)."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    tr = curves["train"]
    steps = [p["step"] for p in tr]
    axes[0].plot(steps, [p["loss"] for p in tr], label="train", alpha=0.8)
    axes[1].plot(steps, [p["bpb_approx"] for p in tr], label="train (approx.)", alpha=0.8)
    for name, pts in curves["eval"].items():
        axes[0].plot([p["step"] for p in pts], [p["loss"] for p in pts], marker="o", label=name)
        axes[1].plot([p["step"] for p in pts], [p["bpb"] for p in pts], marker="o", label=name)
    axes[0].set(xlabel="step", ylabel="loss (nats / token)", title="loss")
    axes[1].set(xlabel="step", ylabel="bits per byte", title="bits per byte")
    for a in axes:
        a.legend()
        a.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def method_bars(rows: list[dict], metrics: tuple[str, ...] = ("tokens_per_s", "peak_rss_mb")):
    """One bar chart per metric, one bar per method (rows of :func:`azllm.train.compare_rows`)."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.2))
    for ax, m in zip(axes, metrics):
        ax.bar([r["method"] for r in rows], [r[m] for r in rows])
        ax.set_title(m.replace("_", " "))
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def encoder_throughput(record: dict):
    """Bar charts of throughput and peak RSS of (a), (b), (c) at 1x and Nx
    (:func:`azllm.recipes.tokens.encoder_record`); returns the matplotlib figure."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    rows = {(r["variant"], r["scale"]): r for r in record["variants"]}
    scales = [1, record["scale"]]
    width = 0.38
    for j, (metric, label) in enumerate([("mtokens_per_s", "tokens/s (millions)"), ("peak_rss_mb", "peak RSS (MB)")]):
        ax = axes[j]
        for i, s in enumerate(scales):
            vals = [rows[(v, s)][metric] for v in "abc"]
            ax.bar(np.arange(3) + (i - 0.5) * width, vals, width, label=f"{s}x corpus")
        if j == 0:
            ax.axhline(
                rows[("limit", 1)]["mtokens_per_s"], color="k", ls="--", lw=1, label="limit (batch encode, all cores)"
            )
        ax.set_xticks(range(3), ["(a) naive list", "(b) per-doc tofile", "(c) encode_corpus"])
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    fig.suptitle("Encoding the corpus: throughput and memory (medians of fresh processes)")
    fig.tight_layout()
    return fig


def variant_bars(rows: list[dict]):
    """Bar charts of median tokens/s and peak memory with min–max whiskers (:func:`azllm.recipes.benchmark.
    variant_rows`); unavailable/OOM variants are shown as empty slots labelled with their status."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * len(rows) + 1.5))
    y = np.arange(len(rows))
    status = [r["status"] for r in rows]

    def col(key):
        return np.array([np.nan if r[key] is None else r[key] for r in rows], dtype=float)

    for ax, key, title in (
        (axes[0], "tokens_per_s", "tokens/s (median, min–max)"),
        (axes[1], "peak_mb", "peak memory above baseline, MiB (median, min–max)"),
    ):
        med, lo, hi = col(f"{key}_median"), col(f"{key}_min"), col(f"{key}_max")
        ax.barh(
            y,
            np.nan_to_num(med),
            xerr=[np.nan_to_num(med - lo), np.nan_to_num(hi - med)],
            capsize=3,
            color=["C0" if s == "ok" else "lightgrey" for s in status],
        )
        for yi, s in enumerate(status):
            if s != "ok":
                ax.text(
                    0,
                    yi,
                    f"  {s.replace('unavailable', 'not available on this device')}",
                    va="center",
                    fontsize=8,
                    color="dimgrey",
                )
        ax.set_yticks(y, [r["variant"] for r in rows])
        ax.invert_yaxis()
        ax.set_title(title)
    fig.tight_layout()
    return fig


def predicted_vs_measured(rows: list[dict]):
    """Measured vs predicted peak memory (MiB, :func:`azllm.recipes.benchmark.prediction_rows`) with the ±20%
    band."""
    d = [r for r in rows if r["measured_mb"] is not None]
    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.scatter([r["measured_mb"] for r in d], [r["predicted_mb"] for r in d])
    for r in d:
        ax.annotate(
            r["variant"], (r["measured_mb"], r["predicted_mb"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
        )
    hi = max([r["measured_mb"] for r in d] + [r["predicted_mb"] for r in d]) * 1.1 if d else 1
    xs = np.linspace(0, hi, 10)
    ax.plot(xs, xs, "k-", lw=0.8, label="predicted = measured")
    ax.fill_between(xs, 0.8 * xs, 1.2 * xs, color="grey", alpha=0.2, label="±20%")
    ax.set_xlabel("measured peak above baseline (MiB)")
    ax.set_ylabel("memory model (MiB)")
    ax.legend()
    fig.tight_layout()
    return fig


def adapt_curves(results: list[dict]):
    """Bits per byte against adaptation steps, on each run's Azerbaijani set (``az_set``) and held-out English
    (``en_set``), one line per way and method (solid: full fine-tuning, dashed: LoRA)."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    colors = {"keep": "tab:blue", "extend": "tab:orange", "swap": "tab:green"}
    for r in results:
        for ax, name in zip(axes, (r["az_set"], r["en_set"])):
            pts = r["curves"]["eval"][name]
            ax.plot(
                [p["step"] for p in pts],
                [p["bpb"] for p in pts],
                marker="o",
                color=colors.get(r["way"]),
                linestyle="-" if r["method"] == "full" else "--",
                label=f"{r['way']} / {r['method']}",
            )
    axes[0].set(
        xlabel="adaptation step",
        ylabel="bits per byte",
        title=f"Azerbaijani ({results[0]['az_set'] if results else ''}): lower is better",
    )
    axes[1].set(xlabel="adaptation step", ylabel="bits per byte", title="English (held out): what the base loses")
    for a in axes:
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.tight_layout()
    return fig


def more_time(results: list[dict], rows: list[dict]):
    """Each run's Azerbaijani bits-per-byte curve (points) with the line :func:`azllm.curves.forecast` fitted to its
    second half, drawn on to the estimate one more hour later (:func:`azllm.recipes.adapt.more_time`'s rows)."""
    from .curves import log_fit

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in results:
        row = next((x for x in rows if (x["way"], x["method"], x["set"]) == (r["way"], r["method"], r["az_set"])), None)
        pts = [p for p in r["curves"]["eval"][r["az_set"]] if p["step"] > 0]
        line = ax.plot(
            [p["step"] for p in pts], [p["bpb"] for p in pts], marker="o", label=f"{r['way']} / {r['method']}"
        )
        if row is None or row["bpb_after"] is None:
            continue
        a, b = log_fit([p for p in pts if p["step"] >= row["last_step"] / 2])
        xs = np.linspace(row["last_step"] / 2, row["last_step"] + row["more_steps"], 50)
        ax.plot(xs, a + b * np.log(xs), linestyle=":", color=line[0].get_color())
        ax.plot([xs[-1]], [row["bpb_after"]], marker="*", markersize=12, color=line[0].get_color())
    ax.set(
        xlabel="adaptation step",
        ylabel="bits per byte",
        title="Azerbaijani: measured (o), fitted to the second half (dotted), one more hour (*, an estimate)",
    )
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def corpus_removed(rows: list[dict]):
    """Horizontal stacked bars per source: MB kept and MB removed by each step
    (:func:`azllm.recipes.corpus.removal_rows`, ``mb``)."""
    mb = sorted((r for r in rows if r["source"] != "total"), key=lambda r: r["mb"]["input"])
    steps = [k for k in (mb[0]["mb"] if mb else {}) if k not in ("input", "kept", "kept_pct")]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(mb) + 1.5))
    left = np.zeros(len(mb))
    for col in ["kept", *steps]:
        vals = np.array([r["mb"][col] for r in mb])
        ax.barh([r["source"] for r in mb], vals, left=left, label=col.replace("_", " "))
        left += vals
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel("MB (symmetric log scale)")
    ax.set_title("What each corpus step removed, per source")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def genre_shares(rows: list[dict]):
    """Horizontal bars: each origin's share of the adaptation's training bytes
    (:func:`azllm.recipes.adapt.training_text`), replayed text in its own colour."""
    rows = sorted(rows, key=lambda r: r["share"])
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(rows) + 1.5))
    colours = ["tab:orange" if r["origin"].startswith("replay: ") else "tab:blue" for r in rows]
    ax.barh([r["origin"] for r in rows], [100 * r["share"] for r in rows], color=colours)
    ax.set_xlabel("% of the training bytes")
    ax.set_title("What the adaptation reads, by origin (replayed text in orange)")
    fig.tight_layout()
    return fig


def gain_vs_loss(ranking: list[dict]):
    """Per recipe (way x method): the Azerbaijani gain against the English change, with 1.96-standard-error bars
    (a point whose bar crosses zero is within noise on that axis)."""
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for r in ranking:
        if r["az_gain"] is None or r["en_change"] is None:
            continue
        ax.errorbar(
            r["en_change"],
            r["az_gain"],
            xerr=1.96 * (r["en_change_se"] or 0),
            yerr=1.96 * (r["az_gain_se"] or 0),
            fmt="o",
            capsize=3,
            label=f"{r['way']} / {r['method']}",
        )
    ax.axhline(0, color="grey", lw=0.8)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("English change (after - before)")
    ax.set_ylabel("Azerbaijani gain (after - before)")
    ax.set_title("What each way bought in Azerbaijani and cost in English (bars: 95%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def sft_curves(results: list[dict]):
    """Training loss (thin) and held-out loss on assistant tokens (markers) against steps, one colour per SFT run."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, r in enumerate(results):
        c = f"C{i}"
        label = f"{r['method']}{' packed' if r['packing'] else ''}"
        tr, ev = r["curves"]["train"], r["curves"]["eval"]
        ax.plot([p["step"] for p in tr], [p["loss"] for p in tr], color=c, alpha=0.5, lw=1, label=f"{label} train")
        ax.plot([p["step"] for p in ev], [p["loss"] for p in ev], color=c, marker="o", label=f"{label} held out")
    ax.set(xlabel="step", ylabel="loss (nats per assistant token)", title="Instruction tuning: lower is better")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def preference_curves(run: dict):
    """Training loss (thin) and held-out loss (markers) against steps of one preference run
    (:func:`azllm.prefer.train.run_preference`'s ``curves``); DPO's loss starts at log 2 = 0.693."""
    fig, ax = plt.subplots(figsize=(8, 4))
    tr, ev = run["curves"]["train"], run["curves"]["eval"]
    ax.plot([p["step"] for p in tr], [p["loss"] for p in tr], color="C0", alpha=0.5, lw=1, label="train")
    ax.plot([p["step"] for p in ev], [p["loss"] for p in ev], color="C0", marker="o", label="held-out pairs")
    ax.set(xlabel="step", ylabel="loss", title="Preference tuning: lower is better")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def distill_curves(study: dict, az_set: str):
    """Bits per byte of the Azerbaijani set against steps for each student, the teacher's as a dashed line."""
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = {"kd": "student (KD)", "ce": "student (cross-entropy)"}
    for i, (name, r) in enumerate(study["runs"].items()):
        ev = r["curves"]["eval"].get(az_set, [])
        ax.plot([p["step"] for p in ev], [p["bpb"] for p in ev], marker="o", color=f"C{i}", label=labels[name])
    ax.axhline(study["teacher"]["eval"][az_set]["bpb"], color="k", ls="--", lw=1, label="teacher")
    ax.set(xlabel="step", ylabel=f"{az_set} bits per byte", title="Distillation: lower is better")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def size_vs_quality(points: list[dict]):
    """Azerbaijani bits per byte against the file size (log scale) for every model and file; hollow markers are
    estimated from a file's perplexity ratio against F16."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    models = list(dict.fromkeys(p["model"] for p in points))
    for i, m in enumerate(models):
        pts = sorted((p for p in points if p["model"] == m), key=lambda p: p["size_mb"])
        ax.plot([p["size_mb"] for p in pts], [p["az_bpb"] for p in pts], color=f"C{i}", lw=0.8, alpha=0.6)
        for p in pts:
            ax.scatter(
                p["size_mb"],
                p["az_bpb"],
                color=f"C{i}",
                facecolors="none" if p["estimated"] else f"C{i}",
                label=m if p is pts[0] else None,
            )
            ax.annotate(p["file"], (p["size_mb"], p["az_bpb"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set(xlabel="size on disk (MB, log)", ylabel="Azerbaijani bits per byte", title="Smaller vs better")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
