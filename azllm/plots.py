"""Matplotlib figures of the reports. Each function takes plain rows (dicts) and returns a Figure."""

from __future__ import annotations

import matplotlib.pyplot as plt

__all__ = ["fertility_vs_vocab", "best_vs_baselines"]


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
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=key,
                linestyle="--" if "affix" in key else "-")
    ax.set_xscale("log", base=2)
    xs = sorted({p[0] for pts in series.values() for p in pts})
    ax.set_xticks(xs, [f"{x // 1000}k" if x >= 1000 else str(x) for x in xs])
    ax.set_xlabel("vocabulary size")
    ax.set_ylabel(metric.replace("_", " "))
    ax.set_title(f"{metric.replace('_', ' ')} on {eval_set} (lower is better)" if metric == "fertility"
                 else f"{metric.replace('_', ' ')} on {eval_set}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def best_vs_baselines(rows: list[dict], eval_set: str, names: list[str], highlight: str | None = None,
                      metric: str = "fertility", target: float | None = None):
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
