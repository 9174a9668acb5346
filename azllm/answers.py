"""The index's answers: one row per stage of the study, ``(question, answer, reference point, page)``, read from a
run's typed record (:func:`headline`, :mod:`azllm.record`: the same record ``azllm results`` renders; a committed
record under ``docs/`` answers as a run folder does). :mod:`azllm.report` writes them into ``index.html``. Every
number and every winner is chosen by a recipe and read here; numbers and verdicts are formatted by
:mod:`azllm.markdown`; what a run did not produce is left out.
"""

from __future__ import annotations

from .markdown import cell as _f
from .record import Record, section

__all__ = ["headline"]


def _pct(share: float | None) -> str | None:
    """A share as a percentage to 4 significant digits at most (1.0 -> "100%", 0.99875 -> "99.88%").

    >>> _pct(1.0), _pct(0.99875), _pct(None)
    ('100%', '99.88%', None)
    """
    return None if share is None else f"{100 * share:.4g}%"


def _corpus_answer(m: Record) -> tuple | None:
    c = section(m, "corpus")
    total = ((c.get("counts") or {}).get("by_source") or {}).get("total") or {}
    if not total.get("input_bytes"):
        return None
    mix = sum(r.get("mix_mb") or 0 for r in c.get("mix") or [])
    sf = c.get("sentence_filter") or {}
    dropped = [r for r in c.get("mix") or [] if r.get("dropped_sentences_pct") is not None]
    sentences = (
        f"; near-duplicate sentences dropped in the mix: up to {max(r['dropped_sentences_pct'] for r in dropped):.1f}%"
        " of a source" + (f" (filter false-positive rate {sf['false_positive']:.1e})" if sf else "")
        if dropped
        else ""
    )
    return (
        "What the corpus stage kept",
        f"{total.get('kept_bytes', 0) / 1e6:,.1f} of {total['input_bytes'] / 1e6:,.1f} MB "
        f"({100 * total.get('kept_bytes', 0) / total['input_bytes']:.1f}%), {total.get('kept_docs', 0):,} documents; "
        f"the mix: {mix:,.1f} MB{sentences}",
        "the input as found; what each step removed is on the page",
        "00_corpus.html",
    )


def _tokens_answer(m: Record) -> tuple | None:
    split = section(m, "tokens_split")
    if not split.get("train_tokens"):
        return None
    ratios = section(m, "tokens_benchmark").get("ratios") or {}
    speed = (
        f"; the encoder at {_f(ratios['c_over_limit_1x'], '{:.2f}')}× the tokenizer's own batch encode"
        if ratios.get("c_over_limit_1x") is not None
        else ""
    )
    return (
        "Token files",
        f"{split['train_tokens']:,} training and {split.get('val_tokens', 0):,} validation tokens "
        f"({100 * split.get('val_share_of_docs', 0):.1f}% of the documents held out){speed}",
        "the limit: the tokenizer's batch encode on all cores, nothing written",
        "02_tokens.html",
    )


def _sft_answer(m: Record) -> tuple | None:
    from .recipes.controls import stage_sentence

    s = section(m, "sft")
    c = s.get("chrf_before_after") or {}
    if c.get("after") is None:
        return None
    tasks = [r for r in s.get("tasks_before_after") or [] if r.get("verdict") in ("gain", "loss")]
    moved = (
        "; beyond the noise on the tasks: "
        + ", ".join(f"{r['task']} {_f(r.get('delta'), '{:+.3f}')} ({r['verdict']})" for r in tasks)
        if tasks
        else ("; every task within noise" if s.get("tasks_before_after") else "")
    )
    stages = s.get("stages") or []
    against = f"; {stage_sentence(stages)}" if len(stages) > 2 else ""  # the controls (two stages: the line above)
    return (
        "Does instruction tuning help (held-out answers)",
        f"chrF++ of {c.get('n')} held-out answers {_f(c.get('before'), '{:.2f}')} → {_f(c['after'], '{:.2f}')} "
        f"({_f(c.get('delta'), '{:+.2f}')} ± {_f(c.get('delta_se'), '{:.2f}')}, {c.get('verdict')}){moved}{against}",
        "the SFT base's own answers before any step; a gain only beyond 1.96 paired standard errors",
        "07_sft.html",
    )


def _preference_answer(m: Record) -> tuple | None:
    p = section(m, "preference")
    rows = {r["measure"].split(" (")[0]: r for r in p.get("judgement") or []}
    acc, chrf, words = rows.get("preference accuracy"), rows.get("chrF++"), rows.get("mean answer words")
    if not acc:
        return None
    said = (
        f"{chrf['measure']} {_f(chrf['before'], '{:.2f}')} → {_f(chrf['after'], '{:.2f}')} "
        f"({_f(chrf['delta'], '{:+.2f}')} ± {_f(chrf['delta_se'], '{:.2f}')}, {chrf['verdict']}); "
        if chrf
        else ""
    )
    length = f"; answers {_f(words['before'], '{:.1f}')} → {_f(words['after'], '{:.1f}')} words" if words else ""
    return (
        "Does preference tuning help (held-out answers)",
        f"{str(p.get('method', '')).upper()}: {said}{acc['measure']} {_f(acc['after'])} ({acc['verdict']} against "
        f"chance){length}",
        "the SFT model's own answers; chance accuracy 0.5; a gain only beyond 1.96 standard errors",
        "09_preference.html",
    )


def _tokenizer_answer(m: Record) -> tuple | None:
    t = section(m, "tokenizers")
    if not t.get("best"):
        return None
    got = ", ".join(f"{k} {_f(v)}" for k, v in (t.get("best_fertility_by_set") or {}).items())
    refs = ", ".join(f"{n} {_f(v)}" for n, v in (t.get("reference_fertility") or {}).items())
    return (
        "Tokens per word",
        f"{t['best']}: {got or '—'}",
        refs or "no baseline in this run",
        "01_tokenizers.html",
    )


def _bpb_answer(m: Record) -> tuple | None:
    final = section(m, "train").get("final") or {}
    if (final.get("val") or {}).get("bpb") is None:
        return None
    uniform = ", ".join(f"{k} {_f(f['uniform_bpb'])}" for k, f in final.items() if f.get("uniform_bpb") is not None)
    return (
        "Held-out bits per byte",
        ", ".join(f"{k} {_f(f.get('bpb'))}" for k, f in final.items()),
        f"a uniform guess over the vocabulary on the same sets: {uniform}" if uniform else "no baseline recorded",
        "03_train.html",
    )


def _adapt_answer(m: Record) -> tuple | None:
    best = section(m, "adapt").get("best")
    if not best:
        return None
    return (
        "Adaptation that wins (Azerbaijani bpb)",
        f"{best['way']} / {best['method']}: {_f(best['az_bpb_before'])} → {_f(best['az_bpb_after'])}; English "
        f"{_f(best['en_bpb_before'])} → {_f(best['en_bpb_after'])} ({_f(best['en_bpb_change'], '{:+.3f}')})",
        "the base before adaptation (step 0)",
        "05_adapt.html",
    )


def _eval_answer(m: Record) -> tuple | None:
    e = section(m, "evaluate")
    top = e.get("top")
    if not top:
        return None
    en = (
        f"; English {e.get('en_headline')} {_f(top['en_change'], '{:+.3f}')} ({top['en_verdict']})"
        if top.get("en_change") is not None
        else ""
    )
    answer = (
        f"{top['way']} / {top['method']}: {e.get('az_headline')} {_f(top['az_gain'], '{:+.3f}')} "
        f"± {_f(top['az_gain_se'])} ({top['az_verdict']}){en}"
    )
    mv = e.get("moved") or {}
    beyond = [f"{r['way']} / {r['method']} {r['task']} {r['delta']:+.2f} ± {r['delta_se']:.2f} ({r['verdict']})"
              for r in [*(mv.get("az") or []), *(mv.get("en") or [])]]  # fmt: skip
    answer += (f"; beyond the noise: {', '.join(beyond)}" if beyond else "; no task beyond the noise") if mv else ""
    if mv.get("base_at_chance") or mv.get("stand_in"):  # no chance-level number presented as an answer
        answer = (
            "none here: this base is a stand-in (the small Llama of 05, at or near chance on every multiple-choice "
            "task), so its downstream changes are noise (" + answer + "). The answer on a real base is the "
            "SmolLM2-135M run: python -m azllm run params/smollm2.yaml (README, results)"
        )
    return (
        "Most Azerbaijani per device-hour (downstream)",
        answer,
        "the base before adaptation; a gain only beyond 1.96 paired standard errors",
        "06_evaluate.html",
    )


def _technique_answers(m: Record) -> list[tuple]:
    b = section(m, "benchmark")
    ok = [r for r in b.get("variants") or [] if r.get("status") == "ok" and r.get("speed_ratio") is not None]
    out = []
    if ok:
        fastest = f" (fastest: {b['fastest_variant']})" if b.get("fastest_variant") else ""
        out.append(
            (
                "Speed × and memory × of each technique",
                "; ".join(
                    f"{r['variant']} {_f(r['speed_ratio'], '{:.2f}')} / {_f(r.get('memory_ratio'), '{:.2f}')}"
                    for r in ok
                )
                + fastest,
                "the baseline variant = 1.00 / 1.00",
                "04_benchmark.html",
            )
        )
    cost = [r for r in b.get("cost") or [] if r.get("usd_per_billion_tokens") is not None]
    if cost:
        cheapest = f" (cheapest: {b['cheapest_variant']})" if b.get("cheapest_variant") else ""
        out.append(
            (
                "$ per billion tokens",
                "; ".join(f"{r['variant']} ${r['usd_per_billion_tokens']:,.0f}" for r in cost) + cheapest,
                f"at {_f(cost[0].get('price_per_hour'), '${:.2f}')}/h, the measured tokens/s of this machine",
                "04_benchmark.html",
            )
        )
    return out


def _distill_answer(m: Record) -> tuple | None:
    v, s = section(m, "distill").get("bpb") or {}, section(m, "deploy").get("summary") or {}
    if not v and not s:
        return None
    parts = []
    if v:
        parts.append(f"student {_f(v.get('kd_bpb'))} vs cross-entropy {_f(v.get('ce_bpb'))} {v.get('az_set')} bpb")
    if s:
        parts.append(
            f"{s.get('model')} {s.get('file')}: {_f(s.get('size_mb'), '{:.1f}')} MB"
            f" (F16 {_f(s.get('f16_size_mb'), '{:.1f}')}),"
            f" KLD {_f(s.get('mean_kld'), '{:.3g}')}, tokenizer parity {_f(_pct(s.get('parity_share')), '{}')}"
            f" of {s.get('parity_lines')} lines"
        )
    return (
        "Small model for a phone (distilled, GGUF)",
        "; ".join(parts),
        f"the teacher {_f(v.get('teacher_bpb'))}" if v else "no distillation in this run",
        "08_distill_deploy.html",
    )


def headline(rec: Record) -> list[tuple[str, str, str, str]]:
    """The few answers of the study, each ``(question, answer, reference point, page)``; what a run did not
    produce is left out. Every number, and every winner (the best tokenizer, the adaptation run, the recipe, the
    fastest and the cheapest variant), is chosen by a recipe and read here from the run's record.

    >>> headline({"adapt": {"best": {"way": "extend", "method": "lora", "az_bpb_before": 2.0, "az_bpb_after": 1.5,
    ...     "en_bpb_before": 1.0, "en_bpb_after": 1.1, "en_bpb_change": 0.1}}})[0][1]
    'extend / lora: 2.000 → 1.500; English 1.000 → 1.100 (+0.100)'
    """
    rows = [
        _corpus_answer(rec),
        _tokenizer_answer(rec),
        _tokens_answer(rec),
        _bpb_answer(rec),
        *_technique_answers(rec),
        _adapt_answer(rec),
        _eval_answer(rec),
        _sft_answer(rec),
        _preference_answer(rec),
        _distill_answer(rec),
    ]
    return [r for r in rows if r is not None]
