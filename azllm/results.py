"""The study's published numbers, rendered from a run's typed record (``azllm results RUN_FOLDER``).

Nothing in the README's results is typed by hand: :func:`azllm.record.run_record` keeps what the renderers read from a
run's ``metrics.json`` (with the run's commit, params hash, machine and each page's time), the record is committed
under ``docs/`` (``docs/smollm2_long.json``), and :func:`markdown` renders the tables of every page the run has
(00-04 of a default report, 05-09 of a study). Numbers, verdict marks and before -> after cells are
:mod:`azllm.markdown`'s. The README and docs/results.md hold that Markdown between
``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``; a test renders the committed record again and compares, so
a number that differs from the recorded run fails the suite.

    python -m azllm results reports/smollm2_long --record docs/smollm2_long.json   # keep the record
    python -m azllm results docs/smollm2_long.json                                 # the Markdown, from the record

Every score carries its standard error; ▲ / ▼ is a change beyond ``z`` standard errors of the difference (paired on
the same items where items exist), · within noise.
"""

from __future__ import annotations

from .markdown import cell, change, heading, pair_table, score_format
from .record import Record, section

__all__ = ["markdown", "headline", "deploy_markdown", "wall_time", "readme_block", "MARK"]

MARK = "results:{name}"
"""The README's markers around a run's rendered tables: ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->``."""


def _seconds(nb: list[dict]) -> float:
    """The pages' wall time in all (a page that recorded none counts 0)."""
    return sum(n["seconds"] or 0 for n in nb)


def _pages(rec: Record) -> list[str]:
    nb = rec.get("notebooks") or []
    if not nb:
        return []
    total = _seconds(nb)
    cells = ", ".join(f"{n['name']} {n['seconds']:,.0f} s" for n in nb)
    r = rec["run"]
    return [
        f"Run `{r['run_name']}` at commit {str(r['git_commit'])[:7]} (params hash {str(r['params_hash'])[:12]}), "
        f"{r['time_utc'] or ''}: {cells}; **{total / 60:.1f} min in all**.",
        "",
    ]


def _adapt(rec: Record) -> list[str]:
    runs = section(rec, "adapt").get("runs") or []
    if not runs:
        return []
    lines = heading(
        "**Adaptation (05)**: bits per byte of the Azerbaijani and English held-out sets, before → after.",
        ["way / method", "az bpb before → after", "en bpb before → after", "tokens/s", "wall s"],
    )
    lines.extend(
        f"| {r['way']} / {r['method']} | {cell(r['az_bpb_before'])} → {cell(r['az_bpb_after'])} | "
        f"{cell(r['en_bpb_before'])} → {cell(r['en_bpb_after'])} | {cell(r.get('tokens_per_s'), '{:,.0f}')} | "
        f"{cell(r.get('wall_s'), '{:,.0f}')} |"
        for r in runs
    )
    return [*lines, "", *_more_time(rec)]


def _more_time(rec: Record) -> list[str]:
    """Notebook 05's curves read forward (``adapt.one_more_hour``, :func:`azllm.curves.forecast`), Azerbaijani
    rows only; records from before the forecast render without it."""
    rows = [r for r in section(rec, "adapt").get("one_more_hour") or [] if r["language"] == "az"]
    if not rows:
        return []
    lines = heading(
        "**Still learning? One more hour (05)**: Azerbaijani bits per byte over the last evaluation interval, and "
        "the line fitted to the run's second half read one more hour of its own steps later (an estimate: the "
        "line has no floor, and past 2x the measured steps it is a guess).",
        ["way / method", "last step", "bpb per 100 steps, last interval", "fitted per doubling", "one more hour"],
    )
    lines.extend(
        f"| {r['way']} / {r['method']} | {r['last_step']:,} | "
        f"{cell(r['last_interval_per_100_steps'], '{:+.3f}').replace('-', '−')} | "
        f"{cell(r['per_doubling'], '{:+.3f}').replace('-', '−')} | {cell(r['last_bpb'])} → {cell(r['bpb_after'])} "
        f"(+{r['more_steps']:,} steps, {r['reach']:.1f}x) |"
        for r in rows
    )
    return [*lines, ""]


def _tasks(rec: Record) -> list[str]:
    rows = section(rec, "evaluate").get("before_after") or []
    if not rows:
        return []
    runs = list(dict.fromkeys(f"{r['way']} / {r['method']}" for r in rows))
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    by = {(r["task"], f"{r['way']} / {r['method']}"): r for r in rows}
    lines = heading(
        "**Tasks before → after (06)**: each adaptation run against the base, on the same items.",
        ["task", "metric", "items", "chance", "base", *runs],
    )
    for t in tasks:
        first = next(by[(t, run)] for run in runs if (t, run) in by)
        fmt = score_format(t, first.get("metric"))
        cells = [change(by[(t, run)], fmt) if (t, run) in by else "—" for run in runs]
        lines.append(
            f"| {t} | {first.get('metric')} | {first.get('n')} | {cell(first.get('chance'), fmt)} | "
            f"{cell(first['before'], fmt)} ± {cell(first.get('before_se'), fmt)} | {' | '.join(cells)} |"
        )
    return [*lines, ""]


_STEPS = (("quality", "quality"), ("language", "language"), ("exact_dedup", "exact dup"), ("near_dedup", "near dup"))


def _corpus(rec: Record) -> list[str]:
    c = section(rec, "corpus")
    by, mix = (c.get("counts") or {}).get("by_source") or {}, {r["source"]: r for r in c.get("mix") or []}
    if not by:
        return []
    steps = [(k, label) for k, label in _STEPS if any(f"{k}_docs" in v for v in by.values())]
    sizes, perf = c.get("sizes") or {}, c.get("performance") or {}
    size = {k: sizes.get(k) or {} for k in ("input", "cleaned", "mix")}
    title = (
        f"**The corpus stage (00)**: {cell(size['input'].get('mb'), '{:.2f}')} MB in "
        f"{cell(size['input'].get('documents'), '{:,}')} documents, "
        f"{cell(size['cleaned'].get('mb'), '{:.2f}')} MB kept, "
        f"{cell(size['mix'].get('mb'), '{:.2f}')} MB in the training mix; documents each step removed, with their MB; "
        f"{c.get('decontamination_hits', 0)} training documents shared an n-gram with an evaluation set; "
        f"{cell(perf.get('mb_per_s_per_core'), '{:.2f}')} MB/s per core on {perf.get('workers')} workers "
        f"({perf.get('executor')})."
    )
    lines = heading(title, ["source", "input MB", *(label for _, label in steps), "kept MB", "mix MB"])
    for name, v in sorted(by.items(), key=lambda kv: (kv[0] == "total", -kv[1].get("input_bytes", 0))):
        removed = [
            f"{v[k + '_docs']:,} / {v.get(k + '_bytes', 0) / 1e6:.2f}" if v.get(k + "_docs") else "0" for k, _ in steps
        ]
        m = mix.get(name) or {}
        mix_mb = sum(r.get("mix_mb") or 0 for r in mix.values()) if name == "total" else m.get("mix_mb")
        label = f"**{name}**" if name == "total" else name
        lines.append(
            f"| {label} | {v.get('input_bytes', 0) / 1e6:.2f} | {' | '.join(removed)} | "
            f"{v.get('kept_bytes', 0) / 1e6:.2f} | {cell(mix_mb, '{:.2f}')} |"
        )
    return [*lines, ""]


def _tokenizers(rec: Record) -> list[str]:
    t = section(rec, "tokenizers")
    rows, recipe = t.get("table") or [], t.get("recipe") or []
    if not rows:
        return []
    sets = list(dict.fromkeys(r["eval_set"] for r in rows))
    by = {(r["tokenizer"], r["eval_set"]): r for r in rows}
    names = sorted({r["tokenizer"] for r in rows}, key=lambda n: by.get((n, sets[0]), {}).get("fertility") or 99)
    lines = heading(
        "**Tokenizers (01)**: tokens per whitespace word on the held-out sets (lower is better) and the share of "
        f"lines that decode back exactly; the run's tokenizer: `{t.get('best')}` (target "
        f"{cell(t.get('fertility_target'), '{:.2f}')}).",
        ["tokenizer", "vocabulary", *(f"{s} tokens/word" for s in sets), *(f"{s} round-trip" for s in sets)],
    )
    for n in names:
        first = next(by[(n, s)] for s in sets if (n, s) in by)
        fert = [cell((by.get((n, s)) or {}).get("fertility")) for s in sets]
        trip = [cell((by.get((n, s)) or {}).get("roundtrip"), "{:.1%}") for s in sets]
        lines.append(f"| {n} | {first.get('vocab_size'):,} | {' | '.join(fert)} | {' | '.join(trip)} |")
    lines.append("")
    if recipe:
        rsets = list(recipe[0].get("fertility") or {})
        lines += heading(
            "**What each change bought (01)**: tokens per word of the main tokenizer's recipe, each step added to the "
            "one before.",
            ["step", "corpus MB", *(f"{s} tokens/word" for s in rsets)],
        )
        lines.extend(
            f"| {r['step']} | {cell(r.get('corpus_mb'), '{:.2f}')} | "
            f"{' | '.join(cell(r['fertility'].get(s)) for s in rsets)} |"
            for r in recipe
        )
        lines.append("")
    lines += _one_at_a_time(t.get("one_at_a_time") or [], t.get("sample_leakage") or [])
    lex = t.get("lexicon") or {}
    if lex:
        parts = "; ".join(
            f"{k} ({v.get('n', 0):,} forms) recall {cell(v.get('recall'))}, precision {cell(v.get('precision'))}"
            for k, v in lex.items()
            if v
        )
        lines += [f"**Suffix boundaries (01)**, `azllm.morph` against the lexicons: {parts}.", ""]
    return lines


def _one_at_a_time(rows: list[dict], leakage: list[dict]) -> list[str]:
    if not rows:
        return []
    sets = list(rows[0].get("fertility") or {})
    lines = heading(
        "**Each remaining choice alone (01)**: the run's tokenizer with one change (at the same size, on the same "
        "sample unless the change is the text): tokens per word and its change (lower is better), the lines as "
        "found that do not decode back, and morphology recall and precision of its cuts on the first set's words.",
        [
            "change",
            *(f"{s} tokens/word (Δ)" for s in sets),
            *(f"{s} raw lines lost" for s in sets),
            "morph recall",
            "morph precision",
            "train s",
        ],
    )
    for r in rows:
        delta = [cell(r["fertility_delta"].get(s), "{:+.3f}").replace("-", "−") for s in sets]
        fert = [f"{cell(r['fertility'].get(s))} ({d})" for s, d in zip(sets, delta, strict=True)]
        lost = [cell(r["raw_roundtrip_failures"].get(s), "{:,}") for s in sets]
        lines.append(
            f"| {r['change']} | {' | '.join(fert)} | {' | '.join(lost)} | {cell(r.get('morph_recall'), '{:.1%}')} | "
            f"{cell(r.get('morph_precision'), '{:.1%}')} | {cell(r.get('train_s'), '{:.1f}')} |"
        )
    if leakage:
        found = sum(r["sample_lines"] for r in leakage)
        lines += [
            "",
            f"Lines of the tokenizers' training sample sharing text with a held-out set: {found:,} (of "
            f"{len(leakage)} sets: {', '.join(r['held_out'] for r in leakage)}).",
        ]
    return [*lines, ""]


def _train(rec: Record) -> list[str]:
    t, split = section(rec, "train"), section(rec, "tokens_split")
    final = t.get("final") or {}
    if not final:
        return []
    lines = heading(
        f"**The model (03)**: {t.get('source')}, {cell(t.get('main_parameters'), '{:,}')} parameters, "
        f"{t.get('method')}, "
        f"{t.get('main_steps')} steps on {cell(split.get('train_tokens'), '{:,}')} training tokens "
        f"({cell(t.get('tokens_per_s'), '{:,.0f}')} tokens/s, peak RSS {cell(t.get('peak_rss_mb'), '{:,.0f}')} MB); "
        "bits "
        "per byte on each held-out set beside a uniform guess over the vocabulary.",
        ["set", "bits per byte", "uniform guess", "loss (nats)"],
    )
    lines.extend(
        f"| {k} | {cell(v.get('bpb'))} | {cell(v.get('uniform_bpb'))} | {cell(v.get('loss'))} |"
        for k, v in final.items()
    )
    return [*lines, ""]


def _benchmark(rec: Record) -> list[str]:
    b = section(rec, "benchmark")
    rows = b.get("variants") or []
    if not rows:
        return []
    pred = {r["variant"]: r for r in b.get("predicted_vs_measured") or []}  # recorded since the GPU record
    took = f" The measurement took {b['seconds'] / 60:.1f} min." if b.get("seconds") else ""
    against = " (min–max), each against the baseline; the memory model's peak over the measured" if pred else ""
    lines = heading(
        f"**Training techniques (04)** on {b.get('device')}, batch {b.get('batch')} x {b.get('seq')} tokens: medians "
        f"over rounds{against or ', each against the baseline'}.{took}",
        [
            "variant",
            "status",
            "tokens/s",
            "speed ratio",
            "peak MB",
            "memory ratio",
            *(["planner ÷ measured"] if pred else []),
            "loss first → last",
        ],
    )
    for r in rows:
        spread = (
            f" ({cell(r.get('tokens_per_s_min'), '{:,.0f}')}–{cell(r.get('tokens_per_s_max'), '{:,.0f}')})"
            if pred and r.get("tokens_per_s_min") is not None
            else ""
        )
        planner = [cell(pred.get(r["variant"], {}).get("predicted_over_measured"), "{:.2f}")] if pred else []
        lines.append(
            f"| {r['variant']} | {r.get('status')} | {cell(r.get('tokens_per_s_median'), '{:,.0f}')}{spread} | "
            f"{cell(r.get('speed_ratio'), '{:.2f}')} | {cell(r.get('peak_mb_median'), '{:,.1f}')} | "
            f"{cell(r.get('memory_ratio'), '{:.2f}')} | {''.join(p + ' | ' for p in planner)}"
            f"{cell(r.get('loss_first'))} → {cell(r.get('loss_last'))} |"
        )
    return [*lines, ""]


def _genres(rec: Record) -> list[str]:
    rows = section(rec, "adapt").get("genres") or []
    if not rows:
        return []
    shares = ", ".join(f"{r['origin']} {r['share']:.1%}" for r in rows)
    return [f"**What the adaptation read (05)**, share of the training bytes: {shares}.", ""]


def _power(rec: Record) -> list[str]:
    rows = section(rec, "evaluate").get("power") or []
    if not rows:
        return []
    lines = heading(
        "**What each measure can detect (06)**: the median paired standard error of the runs' changes and the "
        "minimum detectable effect (MDE, 80% power), beside the largest change any run showed.",
        ["task", "items", "chance", "paired SE", "MDE", "largest change"],
    )
    for r in rows:
        fmt = score_format(r["task"], r.get("metric"))
        lines.append(
            f"| {r['task']} | {r.get('n')} | {cell(r.get('chance'), fmt)} | {cell(r['median_se'], fmt)} | "
            f"{cell(r['mde'], fmt)} | {cell(r['largest_change'], fmt)} |"
        )
    return [*lines, ""]


def _stages(rec: Record) -> list[str]:
    s = section(rec, "sft")
    rows, dec = s.get("stages") or [], s.get("decoding") or {}
    if not rows:
        return []
    lines = heading(
        f"**Which stage helps (07)**: chrF++ of the same {rows[0]['n']} held-out native answers from each model "
        f"(greedy, {dec.get('max_new_tokens')} new tokens, repetition penalty {dec.get('repetition_penalty')} on the "
        f"answer's own tokens), each paired against the {rows[0]['model']}; a loop is an answer in which one word "
        "3-gram occurs three times or more."
        + (
            f" Chance: {rows[0]['chance']:.2f}, each instruction echoed as its answer."
            if rows[0].get("chance") is not None
            else ""
        ),
        ["model", "chrF++ (Δ ± SE)", "MDE", "mean words", "loop rate", "stopped"],
    )
    for r in rows:
        score = change({**r, "after": r["chrf"]}, "{:.2f}") if r.get("delta") is not None else cell(r["chrf"], "{:.2f}")
        lines.append(
            f"| {r['model']} | {score} | {cell(r.get('mde'), '{:.2f}')} | {cell(r['mean_words'], '{:.1f}')} | "
            f"{cell(r['loop_share'], '{:.0%}')} | {cell(r['stopped_share'], '{:.0%}')} |"
        )
    return [*lines, ""]


def _sft(rec: Record) -> list[str]:
    s = section(rec, "sft")
    rows = [r for r in [s.get("chrf_before_after")] if r] + list(s.get("tasks_before_after") or [])
    if not rows:
        return []
    return pair_table("**Instruction tuning (07)**: the SFT base (before) against the SFT export (after).", rows)


def _preference(rec: Record) -> list[str]:
    p = section(rec, "preference")
    judged = [
        {**r, "task": r["measure"], "n": None}
        if r["measure"].startswith("mean answer")
        else {**r, "task": r["measure"]}
        for r in p.get("judgement") or []
    ]
    rows = judged + list(p.get("tasks_before_after") or [])
    if not rows:
        return _against_original(p.get("against_original") or {})
    rpo = f", plus {p['sft_weight']} × the chosen answers' cross-entropy" if p.get("sft_weight") else ""
    title = (
        f"**Preference tuning (09)**: {str(p.get('method', '')).upper()} ({p.get('train_method')}, "
        f"{p.get('steps')} steps{rpo}), the SFT model (before; chance for the accuracy) against the tuned export "
        "(after)."
    )
    return pair_table(title, rows) + _against_original(p.get("against_original") or {})


def _against_original(a: dict) -> list[str]:
    if not a.get("rows"):
        return []
    first = a["chain"][0]
    lines = pair_table(
        f"**The cycle's last model against the {first['model']} (09)**: the preference export (after) against the "
        f"model the cycle started from (before), on the same held-out items."
        + (f" {a['note']}" if a.get("note") else ""),
        a["rows"],
    )
    lines += heading(
        f"Each stage's native answers ({first['n']} held out, chrF++), paired against the {first['model']} and "
        "against the stage before.",
        ["model", "chrF++", f"Δ vs the {first['model']} (± SE)", "Δ vs the stage before (± SE)", "its MDE"],
    )

    def delta(d, se, verdict) -> str:  # "(+d ± se mark)": change()'s cell without its score
        return change({"after": None, "delta": d, "delta_se": se, "verdict": verdict}, "{:.2f}").split(" ", 1)[1]

    for r in a["chain"]:
        vs_first = delta(r["delta"], r["delta_se"], r["verdict"]) if r.get("delta") is not None else "—"
        vs_prev = (
            f"{r['previous']} {delta(r['delta_previous'], r['delta_previous_se'], r['verdict_previous'])}"
            if r.get("previous")
            else "—"
        )
        lines.append(
            f"| {r['model']} | {cell(r['chrf'], '{:.2f}')} | {vs_first} | {vs_prev} | "
            f"{cell(r.get('mde_previous'), '{:.2f}')} |"
        )
    return [*lines, ""]


def _distill(rec: Record) -> list[str]:
    v, s = section(rec, "distill").get("bpb") or {}, section(rec, "deploy").get("summary") or {}
    lines = []
    if v:
        gap = cell(v["kd_minus_ce"], "{:+.3f}").replace("-", "−")
        lines += [
            f"**Distillation (08)**: {v['az_set']} bits per byte: teacher {cell(v['teacher_bpb'])}, KD student "
            f"{cell(v['kd_bpb'])}, cross-entropy student {cell(v['ce_bpb'])} (KD − CE {gap}).",
            "",
        ]
    if s:
        lines += [
            f"**Deployment (08)**: the {s.get('model')} as GGUF {s.get('file')}: {cell(s.get('size_mb'), '{:.1f}')} MB "
            f"(F16 {cell(s.get('f16_size_mb'), '{:.1f}')} MB), mean KL divergence against F16 "
            f"{cell(s.get('mean_kld'), '{:.4f}')}, tokenizer parity {cell(s.get('parity_share'), '{:.1%}')} of "
            f"{s.get('parity_lines'):,} lines.",
            "",
        ]
    return lines


def wall_time(rec: Record) -> str:
    """The run's wall time in one line (the README's first paragraph holds the default report's):

    >>> wall_time({"run": {"run_name": "default", "git_commit": "6305687abc", "machine": {"cpu_count": 2}},
    ...            "notebooks": [{"name": "00_corpus", "seconds": 60.0}, {"name": "01_tokenizers", "seconds": 90.0}]})
    '`azllm run` of `default`: 2.5 min for 2 pages at commit 6305687 on 2 cores.'
    """
    nb, r = rec.get("notebooks") or [], rec["run"]
    total = _seconds(nb)
    cores = (r.get("machine") or {}).get("cpu_count")
    on = f" on {cores} cores" if cores else ""
    return (
        f"`azllm run` of `{r['run_name']}`: {total / 60:.1f} min for {len(nb)} pages at commit "
        f"{str(r['git_commit'])[:7]}{on}."
    )


def _sweep(rec: Record) -> list[str]:
    """A sweep's record (``{"sweep", "run", "rule", "variants", "chosen"}``): each variant's settings and judgement
    in one row, and the setting the rule chose."""
    r, variants = rec["run"], rec["variants"]
    settings = list(dict.fromkeys(k for v in variants for k in v["settings"]))
    measures = [m["measure"] for m in variants[0]["judgement"]]
    title = (
        f"Sweep of the {rec['sweep']} settings on run `{r['run_name']}` (`{r['params_file']}`) at commit "
        f"{str(r['git_commit'])[:7]}, {r['time_utc']}: {r['base_settings']}. Judged on {r['judged_on']}; before is "
        "the SFT model (chance for the accuracy)."
    )
    lines = heading(title, ["variant", *settings, *measures])
    for v in variants:
        by = {m["measure"]: m for m in v["judgement"]}
        cells = [cell(v["settings"].get(k), "{:g}") for k in settings]
        cells += [change(by[m], score_format(m, None)) if m in by else "—" for m in measures]
        lines.append(f"| {v['name']} | {' | '.join(cells)} |")
    return [*lines, "", f"Chosen: **{rec['chosen'] or 'none of them'}** ({rec['rule']}).", ""]


def markdown(rec: Record) -> str:
    """The run's tables as Markdown (what the README holds between its markers); a sweep's record, its one table."""
    if rec.get("sweep"):
        return "\n".join(_sweep(rec)).rstrip() + "\n"
    parts = [_pages(rec), _corpus(rec), _tokenizers(rec), _train(rec), _benchmark(rec)]
    parts += [_genres(rec), _adapt(rec), _tasks(rec), _power(rec), _stages(rec), _sft(rec)]
    parts += [_preference(rec), _distill(rec)]
    exports = sorted(k for k in rec.get("artifacts", {}) if "export" in k or k.startswith("gguf"))
    if exports:
        parts.append([f"Exports (`metrics.json` → `artifacts`): {', '.join(f'`{k}`' for k in exports)}.", ""])
    return "\n".join(line for part in parts for line in part).rstrip() + "\n"


def headline(rec: Record) -> str:
    """The README's block of a study's record: its pages and time, then the cycle's last model against the
    original base (``preference.against_original``), the study's answer; every table of the record is
    :func:`markdown` (docs/results.md). A record without that section is its :func:`markdown`."""
    a = section(rec, "preference").get("against_original") or {}
    if not a.get("rows"):
        return markdown(rec)
    return "\n".join([*_pages(rec), *_against_original(a)]).rstrip() + "\n"


def deploy_markdown(rec: Record) -> str:
    """Notebook 08's detail tables of a run (docs/results.md holds them between its markers): the students against
    the teacher, tokenizer parity, each GGUF file's quality and the speed of each runtime."""
    models = section(rec, "distill").get("models") or []
    d = section(rec, "deploy")
    lines = []
    if models:
        lines += [
            "| model | parameters | layers | az bpb | English bpb | train tokens/s | weights MB |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines.extend(
            f"| {r['model']} | {r['parameters_m']:.1f} M | {r['layers']} | {cell(r['az_bpb'])} | {cell(r['en_bpb'])} | "
            f"{cell(r.get('train_tokens_per_s'), '{:,.0f}')} | {cell(r['weights_mb'], '{:,.0f}')} |"
            for r in models
        )
        lines.append("")
    if d.get("parity"):
        lines += [
            "| model | set | lines | equal | lines with added tokens | lines without |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        lines.extend(
            f"| {r['model']} | {r['set']} | {r['lines']:,} | {cell(r['share'], '{:.1%}')} | {r['with_new_lines']:,} "
            f"({cell(r['with_new_share'], '{:.1%}')}) | {r['without_new_lines']:,} "
            f"({cell(r['without_new_share'], '{:.1%}')}) |"
            for r in d["parity"]
        )
        lines.append("")
    if d.get("files"):
        lines += [
            "| model | file | MB | bits / weight | tensor types | KLD against F16 | ppl ratio | same top-1 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in d["files"]:
            if r.get("mean_kld") is None:
                kld, ppl = f"F16 against PyTorch: max diff {cell(r.get('vs_pytorch_max_abs_diff'))}", "—"
                top = cell(r.get("vs_pytorch_top1"))
            else:
                kld = f"{cell(r['mean_kld'], '{:.4f}')} ± {cell(r.get('kld_se'), '{:.4f}')}"
                ppl = f"{cell(r['ppl_ratio'])} ± {cell(r.get('ppl_ratio_se'))}"
                top = f"{cell(r['same_top1'])} ± {cell(r.get('same_top1_se'))}"
            lines.append(
                f"| {r['model']} | {r['file']} | {cell(r['size_mb'], '{:.1f}')} | "
                f"{cell(r['bits_per_weight'], '{:.2f}')} | "
                f"{r['tensor_types']} | {kld} | {ppl} | {top} |"
            )
        lines.append("")
    if d.get("speed"):
        lines += [
            "| model | runtime | prompt tokens/s | generated tokens/s | peak RSS MB | load s |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        lines.extend(
            f"| {r['model']} | {r['runtime']} | {cell(r['prefill_tokens_per_s'], '{:,.0f}')} | "
            f"{cell(r['gen_tokens_per_s'], '{:,.0f}')} | {cell(r['peak_rss_mb'], '{:,.0f}')} | "
            f"{cell(r['load_s'], '{:.2f}')} |"
            for r in d["speed"]
        )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n" if lines else ""


def readme_block(text: str, name: str) -> str:
    """The Markdown between the markers of ``name`` in ``text`` (the README, docs/results.md; a ValueError when they
    are missing)."""
    start, end = f"<!-- {MARK.format(name=name)} -->\n", f"<!-- /{MARK.format(name=name)} -->"
    if start not in text or end not in text:
        raise ValueError(f"no {start.strip()} ... {end} block")
    return text.split(start, 1)[1].split(end, 1)[0]
