"""Measured results as Markdown: the one number format, verdict mark and before → after cell of every Markdown
table (``azllm results``, the README's and docs' blocks, the model and dataset cards of ``azllm publish``).

Every score carries its standard error; ▲ / ▼ is a change beyond ``z`` standard errors of the difference (paired on
the same items where items exist), · within noise, ? a change without an error estimate.

>>> change({"after": 0.5, "delta": -0.1, "delta_se": 0.02, "verdict": "loss"})
'0.500 (−0.100 ± 0.020 ▼)'
>>> print("\\n".join(pair_table("Title.", [{"task": "sib200_az", "n": 47, "before": 0.2, "after": 0.25,
...     "delta": 0.05, "delta_se": 0.03, "verdict": "within noise", "mde": 0.08}])))
Title.
<BLANKLINE>
| measure | items | chance | before | after (Δ ± SE) | MDE |
| --- | --- | --- | --- | --- | --- |
| sib200_az | 47 | — | 0.200 | 0.250 (+0.050 ± 0.030 ·) | 0.080 |
<BLANKLINE>
"""

from __future__ import annotations

__all__ = ["VERDICT_MARK", "cell", "change", "score_format", "heading", "pair_table"]

VERDICT_MARK = {"gain": "▲", "loss": "▼", "within noise": "·", "no error estimate": "?"}
"""How a before -> after cell marks its verdict (:mod:`azllm.evaluation.compare`)."""


def cell(x, fmt: str = "{:.3f}") -> str:
    """One table cell: ``x`` formatted, or ``—`` for a value that was not measured (None, or NaN from a frame).

    >>> cell(None), cell(float("nan")), cell(1234.5, "{:,.0f}")
    ('—', '—', '1,234')
    """
    return "—" if x is None or x != x else fmt.format(x)


def change(r: dict, fmt: str = "{:.3f}") -> str:
    """``after (Δ ± se mark)`` of a before -> after row (``after``, ``delta``, ``delta_se``, ``verdict``)."""
    d = f"{fmt.format(r['delta']).replace('-', '−')}" if r.get("delta") is not None else "—"
    plus = "+" if r.get("delta") is not None and r["delta"] >= 0 else ""
    mark = VERDICT_MARK.get(r.get("verdict"))
    return f"{cell(r['after'], fmt)} ({plus}{d} ± {cell(r.get('delta_se'), fmt)}{' ' + mark if mark else ''})"


def score_format(task: str, metric: str | None) -> str:
    """The format of a measure's numbers: chrF on two decimals, answer lengths on one, bits per byte on four (a
    preference stage moves English by thousandths), the rest (accuracies) on three.

    >>> score_format("flores_en_az", "chrf"), score_format("sib200_az", "acc"), score_format("mean answer words", None)
    ('{:.2f}', '{:.3f}', '{:.1f}')
    >>> score_format("English bits per byte (253 held-out English documents; lower is better)", None)
    '{:.4f}'
    """
    if task.startswith("mean answer"):
        return "{:.1f}"
    if "bits per byte" in task:
        return "{:.4f}"
    return "{:.2f}" if (metric or "").startswith("chrf") or task.startswith("chrF") else "{:.3f}"


def heading(title: str, columns: list[str]) -> list[str]:
    """A table's title paragraph, header row and separator."""
    return [title, "", f"| {' | '.join(columns)} |", "|" + " --- |" * len(columns)]


def pair_table(title: str, rows: list[dict]) -> list[str]:
    """Rows of before -> after comparisons (a task's or a measure's) as a table: items, chance (what a model that
    does nothing scores: a guess, a copied source, an echoed instruction; — where none is recorded), before, after
    with the change and its mark, and the minimum detectable effect."""
    lines = heading(title, ["measure", "items", "chance", "before", "after (Δ ± SE)", "MDE"])
    for r in rows:
        name = r.get("task") or r.get("measure")
        fmt = score_format(name, r.get("metric"))
        lines.append(
            f"| {name} | {r.get('n') or '—'} | {cell(r.get('chance'), fmt)} | {cell(r['before'], fmt)} | "
            f"{change(r, fmt)} | {cell(r.get('mde'), fmt)} |"
        )
    return [*lines, ""]
