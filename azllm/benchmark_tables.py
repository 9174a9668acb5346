"""Tables of the training benchmark (notebook 04, :mod:`azllm.recipes.benchmark`) as display tables, and the lines
``azllm bench gpu`` prints: labels from :data:`azllm.tables.LABELS`, columns chosen and ordered, nothing computed
(the recipe gives every median, ratio, prediction and cost).

- :func:`variant_table`, :func:`variant_notes`: every variant, measured;
- :func:`prediction_table`, :func:`prediction_notes`: the memory model against the measurement;
- :func:`cost_table`, :func:`job_cost_table`, :func:`fit_table`: what a run costs and what fits;
- :func:`gpu_markdown_table`, :func:`gpu_job_cost_lines`: a GPU run as Markdown.
"""

from __future__ import annotations

from .tables import LABELS, frame

__all__ = [
    "variant_table",
    "variant_notes",
    "prediction_table",
    "prediction_notes",
    "cost_table",
    "job_cost_table",
    "fit_table",
    "gpu_markdown_table",
    "gpu_job_cost_lines",
]

VARIANT_COLUMNS = (
    "variant",
    "status",
    "tokens_per_s_median",
    "tokens_per_s_min",
    "tokens_per_s_max",
    "speed_ratio",
    "step_ms_median",
    "step_ms_min",
    "step_ms_max",
    "peak_mb_median",
    "peak_mb_min",
    "peak_mb_max",
    "memory_ratio",
    "loss_first",
    "loss_last",
    "trainable",
    "load",
)


def variant_table(rows: list[dict]):
    """:func:`azllm.recipes.benchmark.variant_rows`, every variant (one that did not run shows "—"); the reserved
    CUDA memory where it was measured."""
    reserved = any(r.get("reserved_mb_median") is not None for r in rows)
    return frame(rows, [*VARIANT_COLUMNS, *(["reserved_mb_median"] if reserved else [])])


def variant_notes(rows: list[dict]) -> str:
    """The variants that did not run and why, as a Markdown list ("" when every variant ran)."""
    out = [f"- `{r['variant']}`: {r['status']} — {r['note']}" for r in rows if r["status"] != "ok"]
    return "**Not run here:**\n\n" + "\n".join(out) if out else ""


def prediction_table(rows: list[dict]):
    """:func:`azllm.recipes.benchmark.prediction_rows`: the memory model by component next to the measured peak
    (MiB)."""
    return frame(rows)


def prediction_notes(summary: dict) -> list[str]:
    """:func:`azllm.recipes.benchmark.prediction_summary` in plain sentences: the largest relative error, and what
    the baseline's predicted peak is made of."""
    worst = summary["max_rel_pred_error"]
    out = [
        f"largest relative error over {summary['n_measured']} measured variants: "
        + (f"{worst:.1%}" if worst is not None else "none measured")
    ]
    b = summary.get("baseline")
    if b:
        out.append(
            f"baseline: the loss head (B×T×V logits in fp32 and their gradients) is "
            f"{b['logits_share']:.0%} of the predicted peak ({b['logits_mb']:.0f} of "
            f"{b['predicted_mb']:.0f} MiB): the part fused linear cross-entropy removes; weights + optimizer "
            f"states are {b['weights_optimizer_share']:.0%}, the part LoRA, QLoRA and 8-bit optimizers shrink"
        )
    return out


def cost_table(rows: list[dict]):
    """:func:`azllm.recipes.benchmark.cost_rows`: dollars per billion tokens per variant."""
    return frame(rows)


def job_cost_table(rows: list[dict]):
    """:func:`azllm.recipes.benchmark.job_cost_rows`: the whole job per variant."""
    return frame(rows)


def fit_table(rows: list[dict]):
    """:func:`azllm.recipes.benchmark.fit_rows`, the largest batch at each sequence length as ``batch@<seq>``."""
    import pandas as pd

    return pd.DataFrame([{LABELS.get(k, k.replace("batch_at_", "batch@")): v for k, v in r.items()} for r in rows])


def _md_num(x, fmt="{:.0f}") -> str:
    return "–" if x is None else fmt.format(x)


def gpu_markdown_table(metrics: dict) -> str:
    """The measured table of the run (from its metrics.json) as Markdown, as ``azllm bench gpu`` prints it."""
    b = metrics["metrics"]["benchmark"]
    pred = {r["variant"]: r for r in b["predicted_vs_measured"]}
    f = _md_num
    out = [
        "| variant | status | tokens/s (min–max) | speed × | step ms | peak MiB (min–max) | memory × | "
        "predicted MiB | loss first → last |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in b["variants"]:
        p = pred.get(r["variant"], {})
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {(r['note'] or '')[:80]}"
        out.append(
            f"| {r['variant']} | {status} "
            f"| {f(r['tokens_per_s_median'])} ({f(r['tokens_per_s_min'])}–{f(r['tokens_per_s_max'])}) "
            f"| {f(r['speed_ratio'], '{:.2f}')} | {f(r['step_ms_median'])} "
            f"| {f(r['peak_mb_median'])} ({f(r['peak_mb_min'])}–{f(r['peak_mb_max'])}) "
            f"| {f(r['memory_ratio'], '{:.2f}')} | {f(p.get('predicted_mb'))} "
            f"| {f(r['loss_first'], '{:.3f}')} → {f(r['loss_last'], '{:.3f}')} |"
        )
    return "\n".join(out)


def gpu_job_cost_lines(metrics: dict) -> str:
    """The whole-job estimate of the run (``benchmark.job``), one line per variant, as ``azllm bench gpu`` prints it."""
    b = metrics["metrics"]["benchmark"]
    job = b.get("job") or {}
    out = [f"job: {job.get('tokens', 0):.3g} tokens on {job.get('instances')} x {job.get('instance')}"]
    for r in b.get("job_cost") or []:
        out.append(
            f"  {r['variant']:12s} {r['hours']:8.1f} h  on-demand ${r['on_demand_usd']:,.0f}  "
            f"spot ${r['spot_usd']:,.0f}  checkpoints ${r['storage_usd']:.2f}  ({r['tokens_per_s_source']})"
        )
    return "\n".join(out)
