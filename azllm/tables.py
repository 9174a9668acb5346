"""Tables of the reports: the recipes' results (plain rows with snake_case keys) as display tables. This module
renames keys into display labels (:data:`LABELS`, the one place a label lives), chooses and orders columns, builds
DataFrames and formats text; it computes nothing (tests/test_tables.py reads its source and finds no arithmetic):
medians, ratios, shares, costs and winners come from the recipes. Figures of the same results are in
:mod:`azllm.plots`.

- the corpus stage: :func:`corpus_table`, :func:`mix_table` (:mod:`azllm.recipes.corpus`);
- tokenizers: :mod:`azllm.tokenizer_tables`;
- token files: :func:`split_table`, :func:`encoder_table`, :func:`get_batch_row`, :func:`format_encoder_benchmark`
  (:mod:`azllm.recipes.tokens`, :mod:`azllm.bench.encoder`);
- training: :func:`run_table` (:mod:`azllm.recipes.train`);
- the training benchmark: :mod:`azllm.benchmark_tables`;
- adaptation: :func:`adapt_tokenizer_table`, :func:`extension_table`, :func:`genre_table`, :func:`adapt_table`
  (:mod:`azllm.recipes.adapt`);
- evaluation: :func:`score_rows` (one model), :func:`eval_lines` (the same, for a terminal),
  :func:`before_after_table` (every run, each task before -> after), :func:`conventions_table`,
  :func:`contamination_table` and the sentences under them (:mod:`azllm.recipes.evaluate`);
- instruction tuning: :func:`sft_table`, :func:`samples_table` (:mod:`azllm.recipes.sft`).
"""

from __future__ import annotations

from .markdown import VERDICT_MARK

__all__ = [
    "number",
    "LABELS",
    "ENCODER_LABELS",
    "VERDICT_MARK",
    "ALSO_SHOWN",
    "labelled",
    "records",
    "frame",
    "corpus_table",
    "mix_table",
    "split_table",
    "get_batch_row",
    "encoder_table",
    "format_encoder_benchmark",
    "run_table",
    "adapt_tokenizer_table",
    "extension_table",
    "adapt_table",
    "score_rows",
    "eval_lines",
    "before_after_table",
    "conventions_table",
    "genre_table",
    "stage_table",
    "contamination_table",
    "ranking_sentence",
    "moved_sentence",
    "pair_sentence",
    "sft_table",
    "samples_table",
]

LABELS = {
    # corpus
    "mb": "MB",
    "kept_pct": "kept %",
    "clean_mb": "clean MB",
    "clean_pct": "clean %",
    "dropped_sentences_pct": "sentences dropped %",
    "dropped_sentence_mb": "dropped MB",
    "subsampled_docs": "docs subsampled out",
    "capped_docs": "docs past cap",
    "mix_mb": "mix MB",
    "mix_pct": "mix %",
    # tokenizers, token files
    "corpus_mb": "corpus MB",
    "train_s": "train s",
    "morph_recall": "morph recall (words)",
    "morph_precision": "morph precision (words)",
    "lexicon_recall": "morph recall (lexicon)",
    "lexicon_precision": "morph precision (lexicon)",
    "file_mb": "file MB",
    "mtokens_per_s": "Mtokens/s",
    "vs_limit": "vs limit",
    "vs_a": "vs (a)",
    "peak_rss_mb": "peak RSS MB",
    "rss_growth_mb": "RSS growth MB",
    "mtokens_per_cpu_s": "Mtokens/CPU-s",
    # the training benchmark
    "tokens_per_s_median": "tokens/s",
    "tokens_per_s_min": "tokens/s min",
    "tokens_per_s_max": "tokens/s max",
    "speed_ratio": "speed ×",
    "step_ms_median": "step ms",
    "step_ms_min": "step ms min",
    "step_ms_max": "step ms max",
    "peak_mb_median": "peak MB",
    "peak_mb_min": "peak MB min",
    "peak_mb_max": "peak MB max",
    "memory_ratio": "memory ×",
    "reserved_mb_median": "reserved MB",
    "loss_first": "loss first",
    "loss_last": "loss last",
    "weights_mb": "weights",
    "grads_mb": "grads",
    "optimizer_mb": "optimizer",
    "activations_mb": "activations",
    "logits_mb": "logits",
    "predicted_mb": "predicted MB",
    "measured_mb": "measured MB",
    "predicted_over_measured": "pred/meas",
    "usd_per_billion_tokens": "$ per 1B tokens",
    "usd_per_billion_tokens_best": "$ (best)",
    "usd_per_billion_tokens_worst": "$ (worst)",
    "days_per_billion_tokens": "days per 1B tokens",
    "price_per_hour": "price/h",
    "tokens_per_s_per_device": "tokens/s per device",
    "tokens_per_s_source": "tokens/s source",
    "on_demand_usd": "on-demand $",
    "spot_usd": "spot $",
    "checkpoint_gb": "checkpoint GB",
    "storage_usd": "storage $",
    "params_m": "params (M)",
    # adaptation
    "vocab_size": "vocab",
    "tokens_per_word": "tokens/word",
    "english_tokens_changed": "English tokens changed",
    "az_bpb_before": "az bpb before",
    "az_bpb_after": "az bpb after",
    "en_bpb_before": "en bpb before",
    "en_bpb_after": "en bpb after",
    "en_bpb_change": "en bpb change",
    "tokens_per_s": "tokens/s",
    "wall_s": "wall s",
    "new_rows": "new rows",
    # evaluation
    "bos_token": "bos token",
    "prepends_bos": "prepends BOS",
    "fewshot_seed": "few-shot seed",
    "lm_eval": "lm-eval",
    "training_documents_removed": "training documents it would remove",
    # instruction tuning
    "peak_mb": "peak MB",
    "eval_loss": "held-out loss",
    "best_step": "best step",
    "chrf": "chrF++",
    "loss_share": "loss share",
    "before_answer": "before SFT",
    "before_chrf": "chrF++ before",
    "delta": "change",
    "delta_se": "± paired SE",
    "mde": "MDE (80% power)",
    "mean_words": "mean words",
    "loop_share": "loop rate",
    "stopped_share": "stopped at end of turn",
}
"""Display label of each result key the tables show (a key not listed shows as it is)."""

ENCODER_LABELS = {
    "a": "(a) naive list",
    "b": "(b) per-doc encode + tofile",
    "c": "(c) azllm encode_corpus",
    "limit": "limit: batch encode, all cores, no writing",
    "limit_1thread": "1 thread, encode only",
    "hf_batch": "HF tokenizers backend, batch, all cores",
}
"""Display label of each encoder of :mod:`azllm.bench.encoder`."""


ALSO_SHOWN = ("acc_norm", "acc_mutual_info")
"""The other multiple-choice measures shown beside the headline (``acc``) in a model's score table."""


def labelled(row: dict, keys=None) -> dict:
    """``row`` (or its ``keys``, in that order) with every key renamed to its display label."""
    return {LABELS.get(k, k): row.get(k) for k in (row if keys is None else keys)}


def number(x) -> str:
    """A table cell's number (:func:`azllm.utils.significant`): the Stylers of the pages format with it.

    >>> number(268.940889), number(1422.0)
    ('268.9', '1,422')
    """
    from .utils import significant

    return significant(x)


def frame(rows: list[dict], keys=None, index=None):
    import pandas as pd

    df = pd.DataFrame([labelled(r, keys) for r in rows])
    return df.set_index(index) if index is not None and len(df) else df


def records(df) -> list[dict]:
    """A DataFrame as JSON-able rows (NaN -> None)."""
    return [
        {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
        for row in df.to_dict(orient="records")
    ]


def _by_set(name: str, values: dict) -> dict:
    """``{set: value}`` as columns ``"<set> <name>"`` (per eval set, by the set's own name)."""
    return {f"{ev} {name}": v for ev, v in (values or {}).items()}


# ---------------------------------------------------------------------------------------------------- corpus


def corpus_table(rows: list[dict], unit: str = "docs"):
    """:func:`azllm.recipes.corpus.removal_rows` in documents (``docs``) or MB (``mb``): per source, the input,
    what each step removed, what was kept and the share kept."""
    import pandas as pd

    df = pd.DataFrame({r["source"]: labelled(r[unit]) for r in rows}).T
    return df.round(0 if unit == "docs" else 3)


def mix_table(rows: list[dict]):
    """:func:`azllm.recipes.corpus.mix_rows` by source."""
    cols = (
        "source",
        "clean_mb",
        "clean_pct",
        "dropped_sentences_pct",
        "dropped_sentence_mb",
        "subsampled_docs",
        "capped_docs",
        "rate",
        "mix_mb",
        "mix_pct",
    )
    return frame(rows, tuple(c for c in cols if c in rows[0]) if rows else cols, "source").round(3)


# ------------------------------------------------------------------------------------------------- token files


def split_table(rows: list[dict]):
    """:func:`azllm.recipes.tokens.split_rows` by split."""
    return frame(rows, ("split", "documents", "tokens", "file_mb"), "split")


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


ENCODER_COLUMNS = (
    "variant",
    "scale",
    "mtokens_per_s",
    "vs_limit",
    "vs_a",
    "seconds",
    "peak_rss_mb",
    "rss_growth_mb",
    "tokens",
    "mtokens_per_cpu_s",
)


def encoder_table(rows: list[dict]):
    """:func:`azllm.bench.encoder.variant_rows`: each encoder by its label, the scale as ``<n>x``."""
    shown = [{**r, "variant": ENCODER_LABELS.get(r["variant"], r["variant"]), "scale": f"{r['scale']}x"} for r in rows]
    return frame(shown, ENCODER_COLUMNS)


def format_scale_benchmark(rows: list[dict], growth: list[dict]) -> str:
    """A plain-text table of the scale benchmark (:func:`azllm.recipes.scale.scale_rows` and
    :func:`azllm.recipes.scale.growth_rows`), for the terminal."""
    lines = [f"{'size':>6s} {'stage':10s} {'seconds':>9s} {'MB/s':>7s} {'peak RSS MiB':>12s} {'kept':>8s}"]
    for r in rows:
        kept = f"{r['kept']:.2%}" if r["kept"] is not None else "-"
        lines.append(
            f"{r['size']:>6s} {r['stage']:10s} {r['seconds']:9.1f} {r['mb_per_s']:7.2f} {r['peak_rss_mib']:12.0f} "
            f"{kept:>8s}"
        )
    if growth:
        lines.extend(
            [
                "",
                f"{'stage':10s} {'time exp':>8s} {'RSS exp':>7s} {'RSS x':>6s} {'h 15GB/16c':>10s} {'h 15GB/64c':>10s}",
            ]
        )
        for g in growth:
            lines.append(
                f"{g['stage']:10s} {g['time_exponent']:8.2f} {g['rss_exponent']:7.2f} {g['rss_ratio']:6.2f} "
                f"{g['hours_15gb_16_cores']:10.2f} {g['hours_15gb_64_cores']:10.2f}"
            )
    return "\n".join(lines)


def format_encoder_benchmark(res: dict) -> str:
    """A plain-text table of the encoder benchmark's medians and ratios (:func:`azllm.bench.encoder.benchmark`'s
    result: its ``rows`` of :func:`azllm.bench.encoder.variant_rows`), for the terminal."""
    lines = [
        f"{'variant':44s} {'scale':>5s} {'Mtok/s':>7s} {'vs lim':>6s} {'vs (a)':>6s} {'sec':>7s} "
        f"{'peakRSS':>8s} {'growth':>7s} {'Mtok/CPU-s':>10s}"
    ]
    for r in res["rows"]:
        va = f"{r['vs_a']:.2f}" if r["vs_a"] is not None else "-"
        lines.append(
            f"{ENCODER_LABELS.get(r['variant'], r['variant']):44s} {str(r['scale']) + 'x':>5s} "
            f"{r['mtokens_per_s']:7.2f} {r['vs_limit']:6.2f} {va:>6s} {r['seconds']:7.2f} {r['peak_rss_mb']:8.0f} "
            f"{r['rss_growth_mb']:7.0f} {r['mtokens_per_cpu_s']:10.2f}"
        )
    lines.append("")
    lines.extend(f"{k:34s} {v:.3f}" for k, v in res["ratios"].items())
    g = res["get_batch"]
    lines.append(
        f"get_batch({g['batch_size']}, {g['block_size']}): {g['get_batch_ms']:.3f} ms "
        f"({g['batches_per_s']:.0f} batches/s, {g['batch_mtokens_per_s']:.1f} Mtok/s); "
        f"train step {g['train_step_ms']:.1f} ms ({g['model']}); share {g['get_batch_share_of_step']:.2%}"
    )
    la = res.get("load_avg_1min") or [None, None]
    if la[0] is not None:
        cores = res.get("machine", {}).get("cpu_count")
        lines.append(f"load average (1 min) before/after: {la[0]:.1f} / {la[1]:.1f} on {cores} cores")
    lines.append("targets: " + ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in res["targets"].items()))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------- training


def run_table(row: dict):
    """One run of :func:`azllm.recipes.train.run_summary` as a column (``main run``), the final numbers per eval
    set left to their own table."""
    import pandas as pd

    return pd.DataFrame({"main run": {k: v for k, v in row.items() if k != "final"}})


# ------------------------------------------------------------------------------------------------ adaptation


def adapt_tokenizer_table(rows: list[dict]):
    """:func:`azllm.recipes.adapt.tokenizer_rows` by way: tokens per word per eval set as ``tokens/word <set>``."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                **labelled(r, ("way", "vocab_size")),
                **{f"tokens/word {ev}": v for ev, v in r["tokens_per_word"].items()},
                **labelled(r, ("english_tokens_changed",)),
            }
            for r in rows
        ]
    ).set_index("way")


def extension_table(rows: list[dict]):
    """:func:`azllm.recipes.adapt.extension_table`: fertility and round trip per eval set as columns."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                **{k: v for k, v in r.items() if k not in ("fertility", "roundtrip")},
                **_by_set("fertility", r.get("fertility")),
                **_by_set("roundtrip", r.get("roundtrip")),
            }
            for r in rows
        ]
    )


ADAPT_COLUMNS = (
    "way",
    "method",
    "vocab_size",
    "tokens_per_word",
    "az_bpb_before",
    "az_bpb_after",
    "en_bpb_before",
    "en_bpb_after",
    "tokens_per_s",
    "wall_s",
    "trainable",
    "new_rows",
)


def adapt_table(rows: list[dict]):
    """:func:`azllm.recipes.adapt.run_row` per run, by way and method."""
    return frame(rows, ADAPT_COLUMNS).set_index(["way", "method"])


MORE_TIME_COLUMNS = {
    "way": "way",
    "method": "method",
    "set": "set",
    "last_step": "last step",
    "last_bpb": "bpb at the last step",
    "last_interval_per_100_steps": "last interval, bpb per 100 steps",
    "per_doubling": "fitted, bpb per doubling of steps",
    "fitted": "evaluations fitted",
    "more_steps": "steps in one more hour",
    "reach": "x the measured steps",
    "bpb_after": "bpb after one more hour (estimate)",
    "change_after": "change (estimate)",
}


def more_time_table(rows: list[dict]):
    """:func:`azllm.recipes.adapt.more_time` per run and set."""
    import pandas as pd

    df = pd.DataFrame([{label: r.get(k) for k, label in MORE_TIME_COLUMNS.items()} for r in rows])
    return df.set_index(["way", "method", "set"]) if len(df) else df


# ------------------------------------------------------------------------------------------------ evaluation


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
        row[r["task"]] = (
            f"{number(r['before'])} → {number(r['after'])} (±{number(r['delta_se'])}) {VERDICT_MARK[r['verdict']]}"
        )
        row.update(labelled({**r, "wall_s": r["seconds"]}, ("az_bpb_after", "tokens_per_s", "wall_s")))
    return list(out.values())


def genre_table(rows: list[dict]):
    """:func:`azllm.recipes.adapt.training_text`'s rows by origin: documents, bytes and share of the bytes."""
    return frame(rows, ("origin", "documents", "bytes", "share"), "origin")


def stage_table(rows: list[dict]):
    """:func:`azllm.recipes.controls.stage_rows` by model, each difference with its verdict's mark."""
    cols = ("model", "n", "chrf", "delta", "delta_se", "mde", "verdict", "mean_words", "loop_share", "stopped_share")
    return frame([{**r, "verdict": VERDICT_MARK.get(r["verdict"] or "", "")} for r in rows], cols, "model")


def conventions_table(rows: list[dict]):
    """:func:`azllm.recipes.evaluate.conventions` by model."""
    return frame(rows, None, "model")


def contamination_table(rows: list[dict]):
    """:func:`azllm.recipes.evaluate.contamination` by evaluation set."""
    return frame(rows, None, "set")


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
    or that none moved and what the curves say it would take; a base at chance is called a stand-in, and a
    translation change whose scores both sit at or below the identity baseline (the source copied) says so."""

    def change(r):
        low = ""
        if r.get("below_baseline"):
            low = f", at or below the identity baseline {r['chance']:.2f} before and after"
        return f"{r['task']} {r['way']}/{r['method']} {r['delta']:+.3f} ± {r['delta_se']:.3f} ({r['verdict']}{low})"

    z = moved["z"]
    s = ""
    if moved["base_at_chance"] or moved.get("stand_in"):
        s += (
            "The base is a stand-in (the small Llama of notebook 05, at or near chance on the multiple-choice tasks), "
            "so its before -> after changes on the tasks are noise, not an answer. The answer on a real base is the "
            "SmolLM2-135M run (params/smollm2.yaml; its tables are in the README). "
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
        fall = t.get("az_bpb_fall_per_100_steps")
        slope = (
            f"; its Azerbaijani bits per byte still fell {fall:.3f} per 100 steps at the end"
            if fall is not None
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


def sft_table(rows: list[dict]):
    """:func:`azllm.recipes.sft.run_row` per run: packing shown as on / off."""
    return frame([{**r, "packing": "on" if r["packing"] else "off"} for r in rows])


def samples_table(rows: list[dict]):
    """:func:`azllm.recipes.sft.samples`: the held-out answers next to their references (and the base's answers)."""
    return frame(rows)


def distill_sentence(v: dict) -> str:
    """The sentence under the students' table: the KD student's Azerbaijani bits per byte against the cross-entropy
    student's and the teacher's (:func:`azllm.recipes.distill.bpb_verdict`)."""
    if not v:
        return "No cross-entropy baseline was trained (`distill.baseline: false`)."
    closed = f", {v['gap_closed']:.0%} of the gap to the teacher closed" if v.get("gap_closed") is not None else ""
    better = "lower (better)" if v["kd_minus_ce"] < 0 else "not lower"
    return (
        f"On {v['az_set']}, the distilled student reaches {v['kd_bpb']:.3f} bits per byte against "
        f"{v['ce_bpb']:.3f} for the same student on cross-entropy alone ({better}: {v['kd_minus_ce']:+.3f}{closed}); "
        f"the teacher {v['teacher_bpb']:.3f}. Whether that carries to the tasks is the paired table below."
    )
