"""Which stage helps (notebook 07, ``sft.controls``): the same held-out native answers from four models, each paired
against the original base.

- **the original base**: the unadapted model of ``adapt.base`` (SmolLM2-135M-Instruct in the study), the bar to
  beat;
- **adapted**: notebook 05's adapted base before any SFT step;
- **adapted + SFT**: notebook 07's main run;
- **SFT only**: the same SFT recipe (data, steps, method) on the original base, without adaptation.

Each row gives chrF++ of the answers, mean answer words, the loop rate (:func:`azllm.engine.has_loop`), the
share that stopped at the end of turn, and against the original base the paired chrF++ difference with its standard
error, minimum detectable effect and verdict (:func:`azllm.evaluation.compare.difference`). Every model answers with
the same decoding (:func:`azllm.recipes.judge.decoding`); answers pair by conversation id.

With ``sft.base`` set (no adaptation study), there is no original base to compare with: :func:`original_base` is
None and the page says so.
"""

from __future__ import annotations

from ..config import Config

__all__ = ["original_base", "control_answers", "stage_rows", "stage_sentence", "STAGES"]

STAGES = ("original base", "adapted", "adapted + SFT", "SFT only")
"""The models of the comparison, in the order of the table."""


def original_base(cfg: Config) -> str | None:
    """The unadapted base (folder or hub id) SFT's base was adapted from: ``adapt.base``. None when ``sft.base``
    names the base, or for the stand-in (no ``adapt.base``: an English LM pretrained in notebook 05, with no chat
    template or instruction tuning to compare with)."""
    if cfg.sft.base or not cfg.adapt.base:
        return None
    from .adapt import gguf_base

    return gguf_base(cfg)


def control_answers(cfg: Config, *, adapted: dict, adapted_sft: dict, show=print) -> dict[str, dict]:
    """``{stage: answers}`` (:func:`azllm.recipes.sft.answers`' shape) of :data:`STAGES`: ``adapted`` and
    ``adapted_sft`` are notebook 07's before and after; the original base's answers and its SFT run are made here
    (each cached like notebook 07's)."""
    from . import conversations, judge, sft

    out = {"adapted": adapted, "adapted + SFT": adapted_sft}
    base = original_base(cfg)
    if base is None:
        return out
    tok, template = sft.sft_tokenizer(cfg, base)
    data = conversations.sft_data(cfg, tok)
    show(f"controls: the original base {base}: its answers, then the SFT recipe on it")
    out["original base"] = judge.base_answers(cfg, base=base, tokenizer=tok, template=template, data=data)
    run = sft.sft_run(cfg, base=base, tokenizer=tok, template=template, data=data)
    out["SFT only"] = sft.answers(cfg, run, base=base, tokenizer=tok, template=template, data=data)
    return {k: out[k] for k in STAGES if k in out}


def stage_rows(cfg: Config, answers: dict[str, dict]) -> list[dict]:
    """One row per stage: ``{"model", "n", "chrf", "mean_words", "loop_share", "stopped_share", "delta",
    "delta_se", "mde", "verdict", "chance"}``, the difference paired per answer against the first stage (the
    original base when it was scored), on the conversations every stage answered; ``chance``: those instructions
    echoed as their answers (:func:`azllm.sft.generate.echo_chrf`)."""
    from ..evaluation.compare import difference
    from ..sft.generate import chrf_scores, echo_chrf

    if not answers:
        return []
    ids = set.intersection(*({r["id"] for r in a["rows"]} for a in answers.values()))
    ref_name = next(iter(answers))
    rows, ref = [], None
    for name, a in answers.items():
        got = sorted((r for r in a["rows"] if r["id"] in ids), key=lambda r: r["id"])
        score = {
            "value": chrf_scores([r["answer"] for r in got], [r["reference"] for r in got])["chrf++"],
            "items": [r["chrf++"] for r in got],
        }
        ref = ref or score
        d = difference(ref, score, z=cfg.evaluate.z) if name != ref_name else {}
        n = len(got)
        rows.append(
            {
                "model": name,
                "n": n,
                "chrf": score["value"],
                "mean_words": sum(r["words"] for r in got) / n if n else None,
                "loop_share": sum(r["loop"] for r in got) / n if n else None,
                "stopped_share": sum(r["stopped"] for r in got) / n if n else None,
                "delta": d.get("delta"),
                "delta_se": d.get("se"),
                "mde": d.get("mde"),
                "verdict": d.get("verdict"),
                "chance": echo_chrf(got),
            }
        )
    return rows


def stage_sentence(rows: list[dict]) -> str:
    """:func:`stage_rows` in words (the index's answer): each stage against the first (no MDE where the paired
    differences have no spread: no standard error to state it from).

    >>> stage_sentence([{"model": "original base", "chrf": 10.0, "loop_share": 0.25}, {"model": "SFT only",
    ...     "delta": 2.0, "delta_se": 0.5, "verdict": "gain", "mde": 1.4, "loop_share": 0.0}])
    'against the original base (chrF++ 10.00, loop rate 25%): SFT only +2.00 ± 0.50 (gain, MDE 1.40, loop rate 0%)'
    >>> stage_sentence([{"model": "adapted", "chrf": 5.0, "loop_share": 0.0}, {"model": "adapted + SFT",
    ...     "delta": 0.0, "delta_se": 0.0, "verdict": "within noise", "mde": None, "loop_share": 0.0}])
    'against the adapted (chrF++ 5.00, loop rate 0%): adapted + SFT +0.00 ± 0.00 (within noise, loop rate 0%)'
    """

    def n(x, fmt: str) -> str:
        return "—" if x is None else format(x, fmt)

    first, *rest = rows
    head = f"against the {first['model']} (chrF++ {n(first['chrf'], '.2f')}, loop rate {n(first['loop_share'], '.0%')})"
    return f"{head}: " + ", ".join(
        f"{r['model']} {n(r['delta'], '+.2f')} ± {n(r['delta_se'], '.2f')} ({r['verdict']}, "
        f"{'MDE ' + n(r['mde'], '.2f') + ', ' if r.get('mde') is not None else ''}"
        f"loop rate {n(r['loop_share'], '.0%')})"
        for r in rest
    )
