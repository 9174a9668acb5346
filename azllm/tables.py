"""Tables of the reports: plain rows (lists of dicts) or pandas DataFrames built from results, nothing computed
anew. Figures of the same results are in :mod:`azllm.plots`.

- the corpus stage: :func:`corpus_table`, :func:`mix_table`;
- tokenizers: :func:`tokenizer_tables`, :func:`best_summary`;
- training: :func:`data_summary`, :func:`run_summary` (one run), :func:`compare_rows` (full vs LoRA vs QLoRA);
- adaptation: :func:`adapt_rows`;
- evaluation: :func:`score_rows` (one model), :func:`eval_lines` (the same, for a terminal),
  :func:`before_after_table` (every run, each task before -> after);
- token files: :func:`split_summary`, :func:`split_rows`;
- the encoder benchmark: :func:`encoder_benchmark_table`, :func:`get_batch_row`, :func:`format_encoder_benchmark`;
- the training benchmark: :func:`summary_table`, :func:`prediction_table`, :func:`cost_table`,
  :func:`job_cost_table`, :func:`fit_table`; the GPU run's closing-note lines: :func:`gpu_markdown_table`,
  :func:`gpu_job_cost_lines`.
"""

from __future__ import annotations

from . import memory as mem
from .bench.encoder import VARIANT_LABELS

__all__ = [
    "corpus_table",
    "mix_table",
    "adapt_rows",
    "tokenizer_tables",
    "best_summary",
    "data_summary",
    "run_summary",
    "compare_rows",
    "split_summary",
    "split_rows",
    "get_batch_row",
    "encoder_benchmark_table",
    "format_encoder_benchmark",
    "summary_table",
    "prediction_table",
    "prediction_notes",
    "cost_table",
    "job_cost_table",
    "fit_table",
    "records",
    "gpu_markdown_table",
    "gpu_job_cost_lines",
    "score_rows",
    "eval_lines",
    "before_after_table",
    "ranking_sentence",
    "moved_sentence",
    "pair_sentence",
    "sft_rows",
    "sft_samples",
    "ALSO_SHOWN",
    "VERDICT_MARK",
]

MB = 2**20


def records(df) -> list[dict]:
    """A DataFrame as JSON-able rows (NaN -> None), for ``metrics.json``."""
    return [
        {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
        for row in df.to_dict(orient="records")
    ]


# ---------------------------------------------------------------------------------------------------- corpus


def corpus_table(manifest: dict, unit: str = "docs"):
    """Per source (and in total): input, what each step removed, and what was kept, in documents (``docs``) or
    MB (``bytes``); the last column is the share kept."""
    import pandas as pd

    from .corpus.pipeline import STEPS

    rows = {}
    for src, c in manifest["counts"]["by_source"].items():
        scale = 1 if unit == "docs" else 1e6
        row = {"input": c.get(f"input_{unit}", 0) / scale}
        row.update({step: c.get(f"{step}_{unit}", 0) / scale for step in STEPS})
        row["kept"] = c.get(f"kept_{unit}", 0) / scale
        row["kept %"] = 100 * row["kept"] / row["input"] if row["input"] else 0.0
        rows[src] = row
    df = pd.DataFrame(rows).T
    df = df.loc[[i for i in df.index if i != "total"] + (["total"] if "total" in df.index else [])]
    return df.round(0 if unit == "docs" else 3)


def mix_table(manifest: dict, mix: dict):
    """Per source: share of the cleaned corpus, the mix rate (copies per document) and share of the mix."""
    import pandas as pd

    by = {k: v for k, v in manifest["counts"]["by_source"].items() if k != "total"}
    clean_total = sum(v.get("kept_bytes", 0) for v in by.values()) or 1
    mix_total = sum(v["bytes"] for v in mix["counts"].values()) or 1
    rows = {
        s: {
            "clean MB": by[s].get("kept_bytes", 0) / 1e6,
            "clean %": 100 * by[s].get("kept_bytes", 0) / clean_total,
            "rate": mix["rates"].get(s, 0.0),
            "mix MB": mix["counts"].get(s, {}).get("bytes", 0) / 1e6,
            "mix %": 100 * mix["counts"].get(s, {}).get("bytes", 0) / mix_total,
        }
        for s in sorted(by)
    }
    return pd.DataFrame(rows).T.round(3)


# -------------------------------------------------------------------------------------------------- tokenizers

TOKENIZER_COLUMNS = [
    "vocab_size",
    "fertility",
    "continued_words",
    "chars_per_token",
    "bytes_per_token",
    "parity",
    "fallback_rate",
    "vocab_used",
    "roundtrip",
    "morph_recall",
    "morph_precision",
]


def tokenizer_tables(rows: list[dict]) -> dict:
    """One DataFrame per eval set of :func:`azllm.metrics.evaluate`'s rows, tokenizers sorted by fertility."""
    import pandas as pd

    table = pd.DataFrame(rows).set_index(["eval_set", "tokenizer"]).sort_index()
    cols = [c for c in TOKENIZER_COLUMNS if c in table.columns]
    return {ev: table.loc[ev][cols].sort_values("fertility") for ev in dict.fromkeys(r["eval_set"] for r in rows)}


def best_summary(rows: list[dict], best: dict, eval_sets, vocab_size: int) -> dict:
    """The best tokenizer's name, vocabulary size and fertility on the set it was chosen on and on every set."""
    out = {
        "best": best["tokenizer"],
        "best_vocab_size": vocab_size,
        "best_fertility": best["fertility"],
        "selected_on": best["eval_set"],
    }
    for ev in eval_sets:
        r = next(x for x in rows if x["tokenizer"] == best["tokenizer"] and x["eval_set"] == ev)
        out[f"best_fertility_{ev}"] = r["fertility"]
    return out


# --------------------------------------------------------------------------------------------------- training


def data_summary(data: dict, train_bytes_per_token: float) -> dict:
    """The run's tokenizer and token files (:func:`azllm.recipes.tokens.prepare_data`) in one row."""
    enc = data["encode"]
    return {
        "tokenizer_vocab": data["tokenizer"].vocab_size,
        "train_tokens": enc["train_tokens"],
        "val_tokens": enc["val_tokens"],
        "train_bytes_per_token": round(train_bytes_per_token, 3),
        "dev_sets": ", ".join(data["dev"]) or "none",
    }


def run_summary(result: dict) -> dict:
    """The numbers of one :func:`run_training` result that the report shows and records, flat: method, parameters,
    steps, time, tokens/s, step time, peak memory (RSS; CUDA allocated/reserved on a GPU), Liger flags, the first
    evaluated val loss and the final loss/ppl/bpb of every eval set (``final_<set>_<metric>``)."""
    thr = result["throughput"]
    ev = result["curves"]["eval"]
    out = {
        "method": result["method"],
        "source": result["source"],
        "main_parameters": result["parameters"]["total"],
        "main_trainable": result["parameters"]["trainable"],
        "main_steps": result["steps"],
        "train_seconds": round(result["seconds"], 1),
        "tokens_per_s": round(thr["tokens_per_s"] or 0, 1),
        "step_time_s": thr["step_time_s"],
        "peak_rss_mb": thr["peak_rss_mb"],
        **{k: thr[k] for k in ("cuda_max_allocated_mb", "cuda_max_reserved_mb") if k in thr},
        "liger_requested": result["liger"]["requested"],
        "liger_applied": result["liger"]["applied"],
        "liger_reason": result["liger"]["reason"],
    }
    if ev.get("val"):
        out.update(first_val_loss=ev["val"][0]["loss"], first_val_step=ev["val"][0]["step"])
    out.update({f"final_{name}_{m}": v for name, f in result["final"].items() for m, v in f.items()})
    return out


def compare_rows(runs: list[dict]) -> list[dict]:
    """One row per comparison run (:func:`azllm.bench.methods.compare_methods`): trainable/total parameters,
    tokens/s, step time,
    peak memory and the final val loss and bpb."""
    rows = []
    for r in runs:
        t = r["throughput"]
        rows.append(
            {
                "method": r["method"],
                "trainable": r["parameters"]["trainable"],
                "total": r["parameters"]["total"],
                "tokens_per_s": round(t["tokens_per_s"] or 0, 1),
                "step_time_s": round(t["step_time_s"] or 0, 4),
                "peak_rss_mb": t["peak_rss_mb"],
                **({"cuda_max_allocated_mb": t["cuda_max_allocated_mb"]} if "cuda_max_allocated_mb" in t else {}),
                "val_loss": round(r["final"]["val"]["loss"], 4),
                "val_bpb": round(r["final"]["val"]["bpb"], 4),
            }
        )
    return rows


# ------------------------------------------------------------------------------------------------ adaptation


def adapt_rows(results: list[dict], fertility: dict[str, float]) -> list[dict]:
    """One row per adaptation run (:func:`azllm.recipes.adapt.adapt_run`): tokens per word of its tokenizer on the
    run's Azerbaijani set (``az_set``, whatever its name), Azerbaijani and English (``en_set``) bits per byte before
    the first step and after the last, tokens/s and wall time."""
    rows = []
    for r in results:
        ev, az, en = r["curves"]["eval"], r["az_set"], r["en_set"]
        rows.append(
            {
                "way": r["way"],
                "method": r["method"],
                "vocab": r["vocab_size"],
                "tokens/word": fertility[r["way"]],
                "az bpb before": ev[az][0]["bpb"],
                "az bpb after": r["final"][az]["bpb"],
                "en bpb before": ev[en][0]["bpb"],
                "en bpb after": r["final"][en]["bpb"],
                "tokens/s": r["throughput"]["tokens_per_s"],
                "wall s": r["seconds"],
                "trainable": r["parameters"]["trainable"],
                "new rows": r["new_rows"],
            }
        )
    return rows


# ------------------------------------------------------------------------------------------------- token files


def split_summary(enc: dict) -> dict:
    """Documents and tokens per split of :func:`azllm.tokens.encode_corpus`'s result, and the val shares."""
    out = {k: enc[k] for k in ("train_docs", "val_docs", "train_tokens", "val_tokens", "skipped", "dtype")}
    out["val_share_of_docs"] = enc["val_docs"] / (enc["train_docs"] + enc["val_docs"])
    out["val_share_of_tokens"] = enc["val_tokens"] / (enc["train_tokens"] + enc["val_tokens"])
    return out


def split_rows(enc: dict) -> list[dict]:
    """One row per split: documents, tokens, file size."""
    return [
        {
            "split": s,
            "documents": enc[f"{s}_docs"],
            "tokens": enc[f"{s}_tokens"],
            "file MB": enc[s].stat().st_size / 1e6,
        }
        for s in ("train", "val")
    ]


# ------------------------------------------------------------------------------------------- encoder benchmark


def get_batch_row(g: dict) -> dict:
    """The get_batch timing against a training step, as one row."""
    return {
        "get_batch ms": g["get_batch_ms"],
        "batches/s": g["batches_per_s"],
        "tokens/s": g["batch_tokens_per_s"],
        "train step ms": g["train_step_ms"],
        "share of a step": g["get_batch_share_of_step"],
        "model": g["model"],
    }


def encoder_benchmark_table(res: dict) -> list[dict]:
    """The encoder benchmark's medians as rows (for a DataFrame)."""
    rows = []
    lim = res["variants"]["limit@1"]["tokens_per_s"]
    a = {s: res["variants"].get(f"a@{s}", {}).get("tokens_per_s") for s in (1, res["scale"])}
    for k, m in res["variants"].items():
        v, s = k.split("@")
        rows.append(
            {
                "variant": VARIANT_LABELS.get(v, v),
                "scale": f"{s}x",
                "Mtokens/s": m["tokens_per_s"] / 1e6,
                "vs limit": m["tokens_per_s"] / lim,
                "vs (a)": m["tokens_per_s"] / a[int(s)] if a.get(int(s)) else None,
                "seconds": m["seconds"],
                "peak RSS MB": m["peak_rss_mb"],
                "RSS growth MB": m["rss_growth_mb"],
                "tokens": int(m["tokens"]),
                "Mtokens/CPU-s": m["tokens_per_cpu_s"] / 1e6,
            }
        )
    return rows


def format_encoder_benchmark(res: dict) -> str:
    """A plain-text table of the encoder benchmark's medians and ratios (for the terminal)."""
    lines = [
        f"{'variant':44s} {'scale':>5s} {'Mtok/s':>7s} {'vs lim':>6s} {'vs (a)':>6s} {'sec':>7s} "
        f"{'peakRSS':>8s} {'growth':>7s} {'Mtok/CPU-s':>10s}"
    ]
    for r in encoder_benchmark_table(res):
        va = f"{r['vs (a)']:.2f}" if r["vs (a)"] is not None else "-"
        lines.append(
            f"{r['variant']:44s} {r['scale']:>5s} {r['Mtokens/s']:7.2f} {r['vs limit']:6.2f} {va:>6s} "
            f"{r['seconds']:7.2f} {r['peak RSS MB']:8.0f} {r['RSS growth MB']:7.0f} "
            f"{r['Mtokens/CPU-s']:10.2f}"
        )
    lines.append("")
    lines += [f"{k:34s} {v:.3f}" for k, v in res["ratios"].items()]
    g = res["get_batch"]
    lines.append(
        f"get_batch({g['batch_size']}, {g['block_size']}): {g['get_batch_ms']:.3f} ms "
        f"({g['batches_per_s']:.0f} batches/s, {g['batch_tokens_per_s'] / 1e6:.1f} Mtok/s); "
        f"train step {g['train_step_ms']:.1f} ms ({g['model']}); share {g['get_batch_share_of_step']:.2%}"
    )
    la = res.get("load_avg_1min") or [None, None]
    if la[0] is not None:
        lines.append(
            f"load average (1 min) before/after: {la[0]:.1f} / {la[1]:.1f} on {res['machine'].get('cpu_count')} cores"
        )
    lines.append("targets: " + ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in res["targets"].items()))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ training benchmark


def _median(xs) -> float | None:
    import statistics

    xs = [x for x in (xs or []) if x is not None]
    return float(statistics.median(xs)) if xs else None


def _spread(xs) -> tuple[float | None, float | None, float | None]:
    xs = [x for x in (xs or []) if x is not None]
    return (_median(xs), min(xs), max(xs)) if xs else (None, None, None)


def summary_table(bench: dict):
    """One row per variant: status, tokens/s and step time and peak memory (median, min, max), loss after N
    steps, and ratios against the ``baseline`` variant (or the first variant that ran)."""
    import pandas as pd

    rows = []
    for r in bench["results"]:
        tps, tmin, tmax = _spread(r.get("tokens_per_s"))
        st, smin, smax = _spread(r.get("step_s"))
        pk, pmin, pmax = _spread(r.get("peak_mb"))
        row = {
            "variant": r["variant"],
            "status": r["status"],
            "tokens/s": tps,
            "tokens/s min": tmin,
            "tokens/s max": tmax,
            "step ms": st and st * 1e3,
            "step ms min": smin and smin * 1e3,
            "step ms max": smax and smax * 1e3,
            "peak MB": pk,
            "peak MB min": pmin,
            "peak MB max": pmax,
            "loss first": r.get("loss_first"),
            "loss last": r.get("loss_last"),
            "trainable": r.get("trainable"),
            "load": r.get("load_end"),
            "note": r.get("reason", ""),
        }
        if r.get("reserved_mb"):
            row["reserved MB"] = _median(r["reserved_mb"])
        rows.append(row)
    df = pd.DataFrame(rows)
    ok = df[df.status == "ok"]
    base = ok[ok.variant == "baseline"] if (ok.variant == "baseline").any() else ok.head(1)
    if len(base):
        df["speed ×"] = df["tokens/s"] / float(base["tokens/s"].iloc[0])
        df["memory ×"] = df["peak MB"] / float(base["peak MB"].iloc[0])
    return df


def prediction_table(bench: dict):
    """Predicted (memory model, by component) next to measured peak, in MiB, for every variant that ran."""
    import pandas as pd

    rows = []
    for r in bench["results"]:
        p = r["predicted"]
        row = {"variant": r["variant"], "status": r["status"]}
        for k in ("weights", "grads", "optimizer", "activations", "logits"):
            row[k] = p[k] / MB
        row["predicted MB"] = p["total"] / MB
        row["measured MB"] = _median(r.get("peak_mb"))
        row["pred/meas"] = row["predicted MB"] / row["measured MB"] if row["measured MB"] else None
        rows.append(row)
    return pd.DataFrame(rows)


def prediction_notes(pred) -> tuple[float | None, list[str]]:
    """The memory model's largest relative error over the measured variants, and what the baseline's predicted
    peak is made of, in plain sentences."""
    ran = pred[pred["pred/meas"].notna()]
    worst = float((ran["pred/meas"] - 1).abs().max()) if len(ran) else None
    out = [
        f"largest relative error over {len(ran)} measured variants: "
        + (f"{worst:.1%}" if worst is not None else "none measured")
    ]
    base = pred[pred.variant == "baseline"]
    if len(base):
        b = base.iloc[0]
        out.append(
            f"baseline: the loss head (B×T×V logits in fp32 and their gradients) is "
            f"{b['logits'] / b['predicted MB']:.0%} of the predicted peak ({b['logits']:.0f} of "
            f"{b['predicted MB']:.0f} MiB): the part fused linear cross-entropy removes; weights + optimizer "
            f"states are {(b['weights'] + b['optimizer']) / b['predicted MB']:.0%}, the part LoRA, QLoRA and "
            "8-bit optimizers shrink"
        )
    return worst, out


def cost_table(bench: dict, price_per_hour: float, label: str = ""):
    """Dollars per 10**9 training tokens per variant at the measured median (and min–max) throughput."""
    import pandas as pd

    rows = []
    for r in bench["results"]:
        m, lo, hi = _spread(r.get("tokens_per_s"))
        rows.append(
            {
                "variant": r["variant"],
                "status": r["status"],
                "tokens/s": m,
                "$ per 1B tokens": mem.cost_per_billion_tokens(m, price_per_hour) if m else None,
                "$ (best)": mem.cost_per_billion_tokens(hi, price_per_hour) if hi else None,
                "$ (worst)": mem.cost_per_billion_tokens(lo, price_per_hour) if lo else None,
                "days per 1B tokens": 1e9 / m / 86400 if m else None,
                "price/h": price_per_hour,
                "instance": label,
            }
        )
    return pd.DataFrame(rows)


def job_cost_table(
    bench: dict,
    *,
    tokens: float,
    instance: str,
    gpus_per_instance: int,
    instances: int,
    price_per_hour: float,
    spot_price_per_hour: float,
    tokens_per_s: float | None,
    keep_checkpoints: int,
    storage_price_gb_month: float,
):
    """The cost of a whole job per variant (:func:`azllm.memory.job_cost`): the measured median tokens/s of one
    device (or the planned ``tokens_per_s``) x devices, on-demand vs spot, plus checkpoint storage. A checkpoint
    holds the trainable weights and their AdamW states (adapters only for LoRA/QLoRA; the memory model's sizes)."""
    import pandas as pd

    rows = []
    for r in bench["results"]:
        tps = tokens_per_s or _median(r.get("tokens_per_s"))
        if not tps:
            continue
        p = r["predicted"]
        adapters = r["spec"].get("lora") if r.get("spec") else False
        ckpt = mem.checkpoint_bytes(p, adapters=bool(adapters), trainable=r.get("trainable") or 0)
        c = mem.job_cost(
            tokens=tokens,
            tokens_per_s=tps * gpus_per_instance * instances,
            instances=instances,
            price_per_hour=price_per_hour,
            spot_price_per_hour=spot_price_per_hour,
            checkpoint_bytes=ckpt,
            keep_checkpoints=keep_checkpoints,
            storage_price_gb_month=storage_price_gb_month,
        )
        rows.append(
            {
                "variant": r["variant"],
                "tokens/s per device": tps,
                "tokens/s source": "planned" if tokens_per_s else f"measured on {bench['device']}",
                "instance": f"{instances} x {instance}",
                "hours": c["hours"],
                "on-demand $": c["on_demand"],
                "spot $": c["spot"],
                "checkpoint GB": c["checkpoint_gb"],
                "storage $": c["storage"],
            }
        )
    return pd.DataFrame(rows)


def fit_table(
    models: dict,
    variants: list,
    *,
    budgets_gb: list[float],
    seq_lens: list[int],
    reserve_gb: float,
    device: str = "cuda",
):
    """The fit planner (:func:`azllm.memory.fit_plan`) for every model (``{name: LlamaConfig}``) and variant."""
    import pandas as pd

    frames = []
    for mname, cfg in models.items():
        rows = mem.fit_plan(cfg, variants, budgets_gb, seq_lens, reserve_gb=reserve_gb, device=device)
        for r in rows:
            r["model"] = mname
            r["params (M)"] = mem.parameter_count(cfg)["total"] / 1e6
        frames.append(pd.DataFrame(rows))
    df = pd.concat(frames, ignore_index=True)
    return df[["model", "params (M)"] + [c for c in df.columns if c not in ("model", "params (M)")]]


def gpu_markdown_table(metrics: dict) -> str:
    """The measured table of the run (from its metrics.json) as Markdown, for a closing note."""
    rows = metrics["metrics"]["benchmark"]["variants"]
    pred = {r["variant"]: r for r in metrics["metrics"]["benchmark"]["predicted_vs_measured"]}

    def f(x, fmt="{:.0f}"):
        return "–" if x is None else fmt.format(x)

    out = [
        "| variant | status | tokens/s (min–max) | speed × | step ms | peak MiB (min–max) | memory × | "
        "predicted MiB | loss first → last |",
        "|" + "---|" * 9,
    ]
    for r in rows:
        p = pred.get(r["variant"], {})
        out.append(
            f"| {r['variant']} | {r['status'] if r['status'] == 'ok' else r['status'] + ': ' + (r['note'] or '')[:80]} "
            f"| {f(r['tokens/s'])} ({f(r['tokens/s min'])}–{f(r['tokens/s max'])}) | {f(r.get('speed ×'), '{:.2f}')} "
            f"| {f(r['step ms'])} | {f(r['peak MB'])} ({f(r['peak MB min'])}–{f(r['peak MB max'])}) "
            f"| {f(r.get('memory ×'), '{:.2f}')} | {f(p.get('predicted MB'))} "
            f"| {f(r['loss first'], '{:.3f}')} → {f(r['loss last'], '{:.3f}')} |"
        )
    return "\n".join(out)


def gpu_job_cost_lines(metrics: dict) -> str:
    """The whole-job estimate of the run (``benchmark.job``), one line per variant, for a closing note."""
    b = metrics["metrics"]["benchmark"]
    job = b.get("job") or {}
    out = [f"job: {job.get('tokens', 0):.3g} tokens on {job.get('instances')} x {job.get('instance')}"]
    for r in b.get("job_cost") or []:
        out.append(
            f"  {r['variant']:12s} {r['hours']:8.1f} h  on-demand ${r['on-demand $']:,.0f}  "
            f"spot ${r['spot $']:,.0f}  checkpoints ${r['storage $']:.2f}  ({r['tokens/s source']})"
        )
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ evaluation

VERDICT_MARK = {"gain": "▲", "loss": "▼", "within noise": "·", "no error estimate": "?"}
"""How a before -> after cell marks its verdict (:mod:`azllm.evaluation.compare`)."""


def score_rows(res: dict) -> list[dict]:
    """One row per task of one model's scores (:func:`azllm.recipes.evaluate.score_model`): the headline metric,
    its standard error, chance, items, few-shot count (MMLU's subjects pooled, the per-subject rows left out)."""
    return [
        {
            "task": name,
            "metric": t["headline"],
            "value": t["value"],
            "stderr": t["stderr"],
            "chance": t.get("chance"),
            "items": t.get("n"),
            "few-shot": t.get("num_fewshot"),
            **{m: t.get(m) for m in ALSO_SHOWN},
        }
        for name, t in res["tasks"].items()
        if not name.startswith("mmlu_en_")
    ]


ALSO_SHOWN = ("acc_norm", "acc_mutual_info")
"""The other multiple-choice measures shown beside the headline (``acc``) in a model's score table."""


def eval_lines(res: dict) -> list[str]:
    """:func:`score_rows` as aligned text lines (``azllm eval`` prints them)."""

    def num(x, f="{:.4f}"):
        return "—" if x is None else f.format(x)

    return [
        f"{r['task']:<22} {r['metric']:<12} {num(r['value'])} ± {num(r['stderr'])}  chance {num(r['chance'])}  "
        f"n {r['items']}"
        for r in score_rows(res)
    ]


def before_after_table(rows: list[dict], tasks: list[str]) -> list[dict]:
    """One row per run (way x method): per task ``before -> after ± se of the difference`` and the verdict's mark
    (▲ gain, ▼ loss, · within noise), then Azerbaijani bpb, tokens/s and wall time."""
    out: dict[tuple, dict] = {}
    for r in rows:
        if r["task"] not in tasks:
            continue
        row = out.setdefault((r["way"], r["method"]), {"way": r["way"], "method": r["method"]})
        row[r["task"]] = f"{r['before']:.3f} → {r['after']:.3f} (±{r['delta_se']:.3f}) {VERDICT_MARK[r['verdict']]}"
        row.update({"az bpb after": r["az_bpb_after"], "tokens/s": r["tokens_per_s"], "wall s": r["seconds"]})
    return list(out.values())


def ranking_sentence(rank: list[dict], az_task: str, en_task: str) -> str:
    """The plain sentence under the ranking: which recipe wins, whether its gain exceeds the noise, what it cost in
    English, and what changes with a real base."""
    scored = [r for r in rank if r["az_gain"] is not None]
    if not scored:
        return f"No run has a {az_task} score before and after: nothing to rank."
    top = scored[0]
    real = [r for r in scored if r["az_verdict"] == "gain"]
    s = (
        f"Per device-hour, {top['way']} / {top['method']} gains most on {az_task}: {top['az_gain']:+.3f} "
        f"(± {top['az_gain_se']:.3f}, {top['az_verdict']}), English {en_task} {top['en_change']:+.3f} "
        f"({top['en_verdict']}). "
        if top["en_change"] is not None
        else f"Per device-hour, {top['way']} / {top['method']} gains most on {az_task}: {top['az_gain']:+.3f} "
        f"(± {top['az_gain_se']:.3f}, {top['az_verdict']}). "
    )
    s += (
        f"{len(real)} of {len(scored)} recipes gain beyond the noise. "
        if real
        else "No recipe's gain exceeds the noise here. "
    )
    return s


def moved_sentence(moved: dict) -> str:
    """What the study shows (:func:`azllm.recipes.evaluate.moved`) in plain words: the changes beyond the noise,
    or that none moved and what the curves say it would take; a base at chance is called a stand-in."""

    def change(r):
        return f"{r['task']} {r['way']}/{r['method']} {r['delta']:+.3f} ± {r['delta_se']:.3f} ({r['verdict']})"

    z = moved["z"]
    s = ""
    if moved["base_at_chance"]:
        s += (
            "The base sits at chance on every multiple-choice task: it is a stand-in, and its before -> after "
            "changes on the tasks are noise, not an answer. The answer on a real base is the SmolLM2-135M run "
            "(params/smollm2.yaml; its tables are in the README). "
        )
    if moved["az"]:
        s += f"Azerbaijani measures beyond {z} standard errors: " + "; ".join(map(change, moved["az"])) + ". "
    else:
        s += f"No Azerbaijani task measure moves beyond {z} standard errors for any recipe. "
    s += (
        f"English beyond the noise: {'; '.join(map(change, moved['en']))}."
        if moved["en"]
        else "No English measure moves beyond the noise either."
    )
    for t in moved["to_signal"]:
        slope = (
            f"; its Azerbaijani bits per byte still fell {-t['az_bpb_per_100_steps']:.3f} per 100 steps at the end"
            if t["az_bpb_per_100_steps"] is not None and t["az_bpb_per_100_steps"] < 0
            else ""
        )
        s += (
            f" {t['task']} {t['way']}/{t['method']} points up ({t['delta']:+.3f} ± {t['delta_se']:.3f} after "
            f"{t['steps']} steps): if it grew with the steps it would clear {z} SE after about "
            f"{t['steps_needed']:,} steps ({t['tokens_needed']:,} tokens){slope}."
        )
    return s


def pair_sentence(rows: list[dict], z: float = 1.96) -> str:
    """What changed between two models (:func:`azllm.recipes.evaluate.pair_rows`, plus chrF++ rows of the same
    shape): the Azerbaijani and English changes beyond ``z`` standard errors, or that none did."""

    def change(r):
        return f"{r['task']} {r['before']:.3f} → {r['after']:.3f} ({r['delta']:+.3f} ± {r['delta_se']:.3f})"

    out = []
    for lang, name in (("az", "Azerbaijani"), ("en", "English")):
        moved = [r for r in rows if r.get("language") == lang and r.get("verdict") in ("gain", "loss")]
        out.append(
            f"{name} beyond {z} standard errors: " + "; ".join(change(r) for r in moved) + "."
            if moved
            else f"No {name} measure moves beyond {z} standard errors."
        )
    return " ".join(out)


# ------------------------------------------------------------------------------------------------- instruction tuning


def sft_rows(results: list[dict]) -> list[dict]:
    """One row per SFT run (:func:`azllm.recipes.sft.sft_run` / ``sft_job``): method, packing, steps, real tokens/s,
    peak memory (CPU RSS or CUDA allocated), held-out loss on assistant tokens (the best checkpoint's), its step,
    chrF++ of the held-out answers, trainable parameters, loss-carrying share of the training tokens."""
    rows = []
    for r in results:
        t = r["throughput"]
        rows.append(
            {
                "method": r["method"],
                "packing": "on" if r["packing"] else "off",
                "steps": r["steps"],
                "tokens/s": t.get("tokens_per_s"),
                "peak MB": t.get("cuda_max_allocated_mb", t.get("peak_rss_mb")),
                "held-out loss": r["eval_loss"],
                "best step": r["best_step"],
                "chrF++": r.get("chrf++"),
                "trainable": r["parameters"]["trainable"],
                "loss share": r["mask"]["share"],
                "wall s": r["seconds"],
            }
        )
    return rows


def sft_samples(answers: dict, n: int, before: dict | None = None) -> list[dict]:
    """The first ``n`` held-out answers next to their references, with their chrF++ (and, given ``before``, the
    base's answer to the same instruction before SFT)."""
    rows = []
    for i, a in enumerate(answers["rows"][:n]):
        row = {"instruction": a["prompt"]}
        if before is not None:
            b = before["rows"][i]
            if b["prompt"] != a["prompt"]:
                raise ValueError(f"answer {i}: the base's and the SFT model's held-out instructions differ")
            row.update({"before SFT": b["answer"], "chrF++ before": b["chrf++"]})
        rows.append({**row, "answer": a["answer"], "chrF++": a["chrf++"], "reference": a["reference"]})
    return rows
