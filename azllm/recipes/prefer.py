"""Preference tuning (``azllm prefer PARAMS``): the SFT model, pairs, TRL's DPO or KTO, held-out judgement, export.

Reads ``preference`` (and, through the SFT recipe, ``sft``, ``model``, ``data`` and ``evaluate.z``).

1. **The model** (:func:`preference_base`): ``preference.base``, else this run's SFT export, found by its marker
   (:mod:`azllm.recipes.stages`: nothing of adaptation or SFT is loaded when it exists for these params; ``azllm
   sft`` makes it first when missing), with its chat template.
2. **The pairs** (:func:`preference_data`): the user's (``preference.sources``, checked), and, with
   ``preference.build``, pairs built from the SFT data: the reference answers of up to ``build_prompts`` training
   conversations of ``build_sources`` chosen over the SFT model's own greedy answers (on-policy), and native
   answers over machine-translated ones where a prompt has both. Training pairs are decontaminated against the
   held-out conversations and every evaluation text (SFT's rule), and refused when a prompt fills ``max_length``.
   The held-out pairs are built the same way from the conversations the SFT stage judges on
   (:func:`azllm.recipes.judge.judged`: its verdict split when ``sft.verdict_size`` draws one), never trained on;
   with a verdict split, the training loop's eval pairs are built from the selection split instead.
3. **The run** (:func:`azllm.prefer.train.run_preference`) in ``Paths.preference/<method>-<key>``, resumed when
   interrupted.
4. **The judgement** (:func:`judge`), each with its standard error: preference accuracy on the held-out pairs
   (chance 0.5), chrF++ of the held-out answers paired against the SFT model's, the mean answer length of
   both (DPO lengthens answers; a chrF++ change from length alone shows there), and the English guard
   (:func:`english_change`: bits per byte on held-out English text, which a sweep's choice reads).
5. **The export** (``preference.export``): one merged standalone folder with the chat template.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from ..config import Config
from ..sft.template import Template
from .paths import Paths
from .sources import resolve

__all__ = [
    "against_original",
    "on_selection",
    "preference_spec",
    "preference_base",
    "user_pairs",
    "preference_data",
    "judge",
    "data_rows",
    "judgement_rows",
    "chosen_setting",
    "english_change",
    "page_record",
    "prefer_command",
    "preference_benchmark",
]


def preference_spec(cfg: Config, **over):
    """The :class:`~azllm.prefer.train.PreferenceSpec` of ``preference`` (what it does not name: ``sft``'s)."""
    from ..prefer.train import PreferenceSpec
    from .specs import build_spec

    return build_spec(PreferenceSpec, cfg.preference, cfg.sft, seed=cfg.seed, **over)


def preference_base(cfg: Config, show=print) -> str:
    """The model preference tuning starts from (module docstring, step 1)."""
    if cfg.preference.base:
        return cfg.preference.base
    from . import stages

    return stages.require(cfg, "sft", show=show)["artifact"]


def user_pairs(cfg: Config) -> list[dict]:
    """Every record of ``preference.sources``, checked (:func:`azllm.prefer.data.to_pair`)."""
    from ..prefer.data import PreferenceDataError, read_pairs, to_pair

    out = []
    for name, src in cfg.preference.sources.items():
        r = resolve(cfg, src)
        if r.kind == "files":
            for f in r.files:
                out += read_pairs(f, source=name)
        else:
            from datasets import load_dataset

            ds = load_dataset(r.hub, r.config, split=r.split)
            out += [to_pair(dict(rec), f"{r.hub}[{i}]", name) for i, rec in enumerate(ds)]
        if not any(p["source"] == name for p in out):
            raise PreferenceDataError(f"preference.sources.{name}: no records")
    return out


def _answered_pairs(model, tok, template: Template, convs: list[dict], source: str, cfg: Config):
    from ..prefer.data import build_pairs
    from ..sft.generate import generate_answers
    from .judge import answer_decoding, answer_engine

    rows = generate_answers(answer_engine(cfg, model, tok, template), convs, answer_decoding(cfg))
    prompts = [c["messages"][:-1] for c in convs]
    return build_pairs(
        prompts, [r["reference"] for r in rows], [r["answer"] for r in rows], [r["id"] for r in rows], source
    )


def preference_data(cfg: Config, model, tok, template: Template) -> dict:
    """``{"train", "held_out", "selection", "counts", "shares", "sft"}`` (module docstring, step 2); ``model``
    answers the prompts. ``held_out``: the pairs every judgement reads (built from :func:`azllm.recipes.judge.judged`;
    the selection split's with ``preference.judge_on: selection``); ``selection``: the training loop's eval pairs (the
    same pairs without ``sft.verdict_size``)."""
    from ..prefer.data import check_lengths, decontaminate_pairs, native_over_mt, source_shares
    from .conversations import eval_texts, sft_data
    from .judge import judged

    p, s = cfg.preference, cfg.sft
    data = sft_data(cfg, tok)
    train = user_pairs(cfg)
    counts: dict = {"user": len(train)}
    if p.build:
        unknown = sorted(set(p.build_sources) - set(s.sources))
        if unknown:
            raise ValueError(f"preference.build_sources names {unknown}, not in sft.sources ({sorted(s.sources)})")
        convs = [c for c in data["train"] if c["source"] in p.build_sources][: p.build_prompts]
        built, counts["on_policy"] = _answered_pairs(model, tok, template, convs, "on_policy", cfg)
        native = [c for c in data["train"] if s.sources[c["source"]].origin == "native"]
        translated = [c for c in data["train"] if s.sources[c["source"]].origin == "translated"]
        mt = native_over_mt(native, translated)
        counts["native_over_mt"] = len(mt)
        train += built + mt
    if data.get("verdict") and p.judge_on == "selection":  # a sweep's choice: the verdict is never read
        held, counts["held_out"] = _answered_pairs(
            model, tok, template, data["held_out"][: p.held_out_pairs], "selection", cfg
        )
        counts["selection"], selection = counts["held_out"], held
    else:
        held, counts["held_out"] = _answered_pairs(
            model, tok, template, judged(data)[: p.held_out_pairs], "held_out", cfg
        )
        selection = held
    if data.get("verdict") and p.judge_on == "verdict":  # the loop's eval pairs: the selection split's
        selection, counts["selection"] = _answered_pairs(
            model, tok, template, data["held_out"][: p.held_out_pairs], "selection", cfg
        )
    texts, _ = eval_texts(cfg)
    train, counts["decontaminated"] = decontaminate_pairs(
        train, held_out=data["held_out"] + data.get("verdict", []), eval_texts=texts, n=s.decontaminate_ngram
    )
    if not train or not held or not selection:
        raise ValueError(f"preference tuning needs training and held-out pairs; got {len(train)} and {len(held)}")
    check_lengths(train + held + (selection if selection is not held else []), tok, p.max_length)
    counts["trained"] = len(train)
    return {
        "train": train,
        "held_out": held,
        "selection": selection,
        "counts": counts,
        "shares": source_shares(train),
        "sft": data,
    }


def _unpaired(pairs: list[dict]) -> list[dict]:
    """Each pair as a good and a bad completion (KTO)."""
    return [
        {
            "id": f"{x['id']}/{k}",
            "source": x["source"],
            "prompt": x["prompt"],
            "completion": x[k],
            "label": k == "chosen",
        }
        for x in pairs
        for k in ("chosen", "rejected")
    ]


def on_selection(data: dict) -> dict:
    """:func:`preference_data`'s ``data`` judged on its selection split (``preference.judge_on: selection``, what a
    sweep chooses on): the held-out pairs and the answers judged become the selection split's, and the verdict split
    is left unread. Without a verdict split the two are one, and ``data`` is returned as it is.

    >>> d = {"held_out": ["v"], "selection": ["s"], "sft": {"held_out": ["S"], "verdict": ["V"]}}
    >>> on_selection(d)["held_out"], on_selection(d)["sft"]["verdict"]
    (['s'], [])
    """
    if not data["sft"].get("verdict"):
        return data
    return {**data, "held_out": data["selection"], "sft": {**data["sft"], "verdict": []}}


def judge(cfg: Config, model, sft_model, tok, template: Template, data: dict) -> dict:
    """Held-out preference accuracy (against ``sft_model`` when given, else the adapter disabled), chrF++ of the
    held-out answers paired against the SFT model's (:func:`azllm.recipes.judge.chrf_change`), and the mean answer
    length of both."""
    from ..prefer.train import preference_accuracy
    from .judge import answer_change, chrf_change, scored_answers

    p = cfg.preference
    acc = preference_accuracy(model, tok, data["held_out"], beta=p.beta, ref_model=sft_model, max_length=p.max_length)
    after = scored_answers(cfg, model, tok, template, data["sft"])
    before = scored_answers(cfg, sft_model, tok, template, data["sft"]) if sft_model is not None else None
    out = {"preference_accuracy": {k: v for k, v in acc.items() if k != "margins"}, "answers": after["rows"]}
    if before is not None:
        out["chrf"] = chrf_change(cfg, before, after)
        out["sft_answers"] = before["rows"]
    lengths = {"after": [len(r["answer"].split()) for r in after["rows"]]}
    if before is not None:
        lengths["before"] = [len(r["answer"].split()) for r in before["rows"]]
        out["loops"] = answer_change(cfg, before, after, measure="loop")
        out["empty"] = answer_change(cfg, before, after, measure="empty")
    out["mean_answer_words"] = {k: sum(v) / len(v) for k, v in lengths.items() if v}
    if sft_model is not None:
        out["english"] = english_change(cfg, sft_model, model, tok)
    return out


def english_change(cfg: Config, before, after, tok) -> dict:
    """The English guard: bits per byte of two models on the held-out English text (``adapt.english_eval``, each
    document cut at ``train.block_size`` tokens), paired (:func:`azllm.evaluation.bpb.bpb_change`; lower is better),
    with the number of documents it read."""
    from ..data import iter_documents
    from ..evaluation.bpb import bpb_change, document_bpb

    docs = list(iter_documents(resolve(cfg, cfg.adapt.english_eval)))
    kw = {"max_tokens": cfg.train.block_size, "batch_size": cfg.train.eval_batch_size}
    return bpb_change(document_bpb(before, tok, docs, **kw), document_bpb(after, tok, docs, **kw), z=cfg.evaluate.z)


def data_rows(record: dict) -> list[dict]:
    """The pairs of a run (:func:`prefer_command`'s record), step by step: what each source gave, what
    decontamination dropped, what was trained on and held out, with each source's share of the training pairs."""
    c, shares = record["counts"], record["shares"]
    built = c.get("on_policy") or {}
    rows = [{"step": "user pairs (preference.sources)", "pairs": c.get("user", 0), "share": None}]
    if built:
        rows.append(
            {
                "step": f"built on-policy (reference over the model's answer, {built['empty']} of them empty; "
                f"{built['same']} answers equal to the reference made no pair)",
                "pairs": built["built"],
                "share": None,
            }
        )
    if "native_over_mt" in c:
        rows.append({"step": "built: native over machine-translated", "pairs": c["native_over_mt"], "share": None})
    dropped = sum(v for k, v in (c.get("decontaminated") or {}).items() if k != "examples")
    rows.append({"step": "dropped: overlap with held-out or evaluation text", "pairs": dropped, "share": None})
    rows += [{"step": f"trained on: {k}", "pairs": round(v * c["trained"]), "share": v} for k, v in shares.items()]
    rows.append({"step": "held out (never trained on)", "pairs": c["held_out"]["built"], "share": None})
    return rows


def chosen_setting(variants: list[dict]) -> dict | None:
    """The best measured preference setting of a sweep (:data:`azllm.recipes.sweep.RULE`). Among the variants
    (``{"name", "settings", "judgement": judgement_rows(...)}``) that help (preference accuracy above chance beyond
    the noise, the answers' chrF++ not below the SFT model's beyond it):

    - those that keep English (English bits per byte not up beyond the noise; a variant judged before the guard
      existed has no such row and keeps it): the one with the largest chrF++ change;
    - when every helping variant loses English: the one that loses the least.

    None when no variant helps.

    >>> def judged(chrf, verdict, en=0.0, en_verdict="within noise"):
    ...     acc = {"measure": "preference accuracy", "delta": 0.4, "verdict": "gain"}
    ...     english = {"measure": "English bits per byte", "delta": en, "verdict": en_verdict}
    ...     return [acc, {"measure": "chrF++", "delta": chrf, "verdict": verdict}, english]
    >>> sweep = [{"name": "a", "judgement": judged(-3.0, "loss")}, {"name": "b", "judgement": judged(0.2, "·")}]
    >>> chosen_setting(sweep)["name"]
    'b'
    >>> sweep.append({"name": "c", "judgement": judged(1.5, "·", en=0.02, en_verdict="loss")})
    >>> chosen_setting(sweep)["name"]
    'b'
    >>> chosen_setting(sweep[2:] + [{"name": "d", "judgement": judged(0.1, "·", en=0.01, en_verdict="loss")}])["name"]
    'd'
    """

    def of(v: dict, measure: str) -> dict | None:
        return next((r for r in v["judgement"] if r["measure"].startswith(measure)), None)

    helps = [
        v
        for v in variants
        if of(v, "preference accuracy")["verdict"] == "gain" and of(v, "chrF++")["verdict"] != "loss"
    ]
    keeps = [v for v in helps if (of(v, "English") or {}).get("verdict") != "loss"]
    if keeps:
        return max(keeps, key=lambda v: of(v, "chrF++")["delta"])
    return min(helps, key=lambda v: of(v, "English")["delta"], default=None)


def judgement_rows(record: dict) -> list[dict]:
    """The held-out measures of a run, one row each: the SFT model (before) against the preference-tuned one
    (after), the change with its standard error, its verdict, and the chance level where one exists.

    Preference accuracy is judged against chance with the standard error chance itself would have
    (``sqrt(0.25 / n)``: a binomial test), which also holds when every pair is right and the observed SE is 0."""
    from ..evaluation.compare import mde

    acc, words = record["preference_accuracy"], record["mean_answer_words"]
    null_se = math.sqrt(acc["chance"] * (1 - acc["chance"]) / acc["n"])
    rows = [
        {
            "measure": f"preference accuracy ({acc['n']} held-out pairs)",
            "before": acc["chance"],
            "after": acc["accuracy"],
            "delta": acc["accuracy"] - acc["chance"],
            "delta_se": null_se,
            "verdict": _verdict(acc["accuracy"] - acc["chance"], null_se, record["z"]),
            "mde": mde(null_se, z=record["z"]),
            "chance": acc["chance"],
            "n": acc["n"],
        }
    ]
    ch = record.get("chrf")
    if ch:
        rows.append(
            {
                "measure": f"chrF++ ({ch['n']} held-out answers)",
                **{k: ch[k] for k in ("before", "after", "delta", "delta_se", "verdict")},
                "mde": ch.get("mde"),
                "chance": ch.get("chance"),
                "n": ch["n"],
            }
        )
    for key, label in (("loops", "loop rate"), ("empty", "empty answers"), ("english", "English bits per byte")):
        if change := record.get(key):
            units = "held-out English documents" if key == "english" else "held-out answers"
            rows.append(
                {
                    "measure": f"{label} ({change['n']} {units}; lower is better)",
                    **{k: change[k] for k in ("before", "after", "delta", "delta_se", "verdict", "mde", "n")},
                    "chance": None,
                }
            )
    if "before" in words:
        rows.append(
            {
                "measure": "mean answer words",
                "before": words["before"],
                "after": words["after"],
                "delta": words["after"] - words["before"],
                "delta_se": None,
                "verdict": "length, not quality",
                "mde": None,
                "chance": None,
            }
        )
    return rows


def against_original(cfg: Config, record: dict) -> dict | None:
    """The cycle's last model (the preference export of ``record``, :func:`prefer_command`'s) against the original
    base it came from (``adapt.base``, :func:`azllm.recipes.controls.original_base`), on the judged split (the
    verdict split with ``sft.verdict_size``): ``{"chain", "rows"}``.

    - ``chain``: the native answers of the original base, the SFT model (the preference base) and the preference
      export, each paired against the original (:func:`azllm.recipes.controls.stage_rows`) and against the stage
      before (``previous``, ``delta_previous``, ``delta_previous_se``, ``mde_previous``, ``verdict_previous``);
    - ``rows``: before -> after rows (original -> last model): chrF++ of those answers (chance: the instructions
      echoed), then every task of ``evaluate.tasks`` and the probe (:func:`azllm.recipes.evaluate.pair_rows`).

    Every model answers with the same decoding and its own chat template; each answer set and score is cached by
    its model's weights (notebook 07's controls and notebook 09's tasks are read back, not run again). None
    without an original base (``sft.base`` or the stand-in) or without an export."""
    from . import controls, conversations, judge, sft
    from .evaluate import base_scores, folder_scores, pair_rows

    original = controls.original_base(cfg)
    if original is None or not record.get("export"):
        return None
    answers = {}
    for name, folder in (
        ("original base", original),
        ("adapted + SFT", record["base"]),
        ("adapted + SFT + preference", record["export"]),
    ):
        tok, template = sft.sft_tokenizer(cfg, str(folder))
        data = conversations.sft_data(cfg, tok)
        answers[name] = judge.base_answers(cfg, base=str(folder), tokenizer=tok, template=template, data=data)
    chain = controls.stage_rows(cfg, answers)
    names = list(answers)
    for prev, row in zip(names, chain[1:]):
        d = controls.stage_rows(cfg, {prev: answers[prev], row["model"]: answers[row["model"]]})[1]
        row.update(
            previous=prev,
            delta_previous=d["delta"],
            delta_previous_se=d["delta_se"],
            mde_previous=d["mde"],
            verdict_previous=d["verdict"],
        )
    first, last = chain[0], chain[-1]
    native = {
        "task": "chrF++ (held-out answers)",
        "language": "az",
        "metric": "chrf++",
        "n": last["n"],
        "before": first["chrf"],
        "after": last["chrf"],
        **{k: last[k] for k in ("delta", "delta_se", "verdict", "mde", "chance")},
    }
    tasks = pair_rows(cfg, base_scores(cfg, original), folder_scores(cfg, record["export"]))
    return {"chain": chain, "rows": [native, *tasks]}


def page_record(record: dict) -> dict:
    """What notebook 09 records under ``preference`` in ``metrics.json`` from :func:`prefer_command`'s record: the
    run, the pairs step by step (:func:`data_rows`), the held-out judgement (:func:`judgement_rows`) with its parts,
    the samples and the export's path."""
    if record.get("interrupted"):
        raise RuntimeError(f"preference tuning was interrupted at step {record.get('steps')}; rerun to resume it")
    judgement = judgement_rows(record)
    keep = ("method", "train_method", "sft_weight", "base", "export", "preference_accuracy", "chrf", "loops")
    keep += ("empty", "english", "mean_answer_words", "samples")
    return {
        **{k: record.get(k) for k in keep},
        "steps": record["run"]["steps"],
        "seconds": record["run"]["seconds"],
        "pairs": data_rows(record),
        "judgement": judgement,
        "accuracy_verdict": judgement[0]["verdict"],
    }


def _verdict(delta: float, se: float, z: float) -> str:
    return "gain" if delta > z * se else "loss" if delta < -z * se else "within noise"


def prefer_command(cfg: Config, *, environ=None, show=print) -> dict:
    """``azllm prefer PARAMS``: every step of the module docstring; returns (and writes to ``prefer.json`` in the
    run's folder) ``{"key", "output_dir", "base", "method", "train_method", "sft_weight", "counts", "shares", "run",
    "preference_accuracy", "chrf", "loops", "empty", "mean_answer_words", "samples", "export", "z"}``
    (``interrupted`` on SIGTERM). A finished run with the same key is returned as it is.

    Inside a SageMaker job (:func:`azllm.sagemaker.job_paths`; ``launch.command: prefer``) the ``data`` channel is
    the data root, the run's folder is in the synced checkpoint folder (a restarted spot job resumes there, or finds
    the finished run), the merged export goes to ``SM_MODEL_DIR`` and ``prefer.json`` to ``SM_OUTPUT_DATA_DIR``. The
    job needs ``preference.base`` (a hub id or a model the job can read): it does not run SFT first."""
    import torch

    from .. import sagemaker
    from ..assemble import load_base
    from ..prefer.train import run_preference
    from ..sft.template import add_token_rows, prepare_tokenizer
    from ..sft.train import lora_config, prepare_model
    from ..utils import atomic_write_json, json_hash, seed_everything, weights_id
    from .judge import decoding
    from .sft import load_base_tokenizer, lora_kwargs, model_kwargs

    sm = sagemaker.job_paths(environ)
    if sm is not None:
        if not cfg.preference.base:
            raise ValueError("a SageMaker preference job needs preference.base (a hub id, or the SFT job's model)")
        if sm.get("data"):
            from ..config import deep_update

            cfg = Config.model_validate(deep_update(cfg.to_dict(), {"data": {"root": sm["data"]}}))
    base = preference_base(cfg, show)
    tok = load_base_tokenizer(base)
    template = prepare_tokenizer(tok, template="auto", name=str(base))
    sft_model = load_base(base, torch.float32).eval()
    add_token_rows(sft_model, list(template["added_tokens"]))
    data = preference_data(cfg, sft_model, tok, template)
    if cfg.preference.judge_on == "selection":
        data = on_selection(data)
    spec, method = preference_spec(cfg), cfg.preference.train_method
    desc = {"base": str(base), "weights": weights_id(base), "method": method, **model_kwargs(cfg)}
    if method != "full":
        desc["lora"] = lora_kwargs(cfg)
    pairs = [[p["prompt"], p["chosen"], p["rejected"]] for p in data["train"]]
    held = [p["id"] for p in data["held_out"]]
    keyed = {"model": desc, "spec": spec.keyed(), "pairs": pairs, "held": held, "decoding": decoding(cfg)}
    if data["selection"] is not data["held_out"]:  # without a verdict split, the key of the records made before it
        keyed["selection"] = [p["id"] for p in data["selection"]]
    key = json_hash(keyed)
    out = (Path(sm["checkpoints"]) if sm else Paths.of(cfg).preference) / f"{spec.method}-{method}-{key}"
    try:
        done = json.loads((out / "prefer.json").read_text())
        if done.get("key") == key:
            return done
    except (OSError, ValueError):
        pass
    show(
        f"prefer: {spec.method} ({method}) from {base}; {len(data['train'])} training pairs "
        f"({', '.join(f'{k} {v:.0%}' for k, v in data['shares'].items())}), {len(data['held_out'])} held out"
    )
    seed_everything(cfg.seed)
    new_ids = list(template["added_tokens"])
    model, info = prepare_model(base, method=method, new_token_ids=new_ids, **model_kwargs(cfg))
    peft = lora_config(model, new_token_ids=new_ids, **lora_kwargs(cfg)) if method != "full" else None
    shaped = _unpaired if spec.method == "kto" else (lambda x: x)
    r = run_preference(
        model,
        tok,
        spec,
        train_pairs=shaped(data["train"]),
        eval_pairs=shaped(data["selection"]),
        output_dir=out,
        key=key,
        peft_config=peft,
        info={"method": method, "parameters": info["parameters"]},
    )
    if r.get("interrupted"):
        return {k: v for k, v in r.items() if k not in ("model", "trainer")}
    verdict = judge(cfg, r["model"], sft_model, tok, template, data)
    record = {
        "key": key,
        "output_dir": str(out),
        "base": str(base),
        "method": spec.method,
        "train_method": method,
        "sft_weight": spec.sft_weight,
        "counts": data["counts"],
        "shares": data["shares"],
        "run": {k: v for k, v in r.items() if k not in ("model", "trainer")},
        **{k: v for k, v in verdict.items() if k not in ("answers", "sft_answers")},
        "samples": _samples(verdict, cfg.sft.samples_shown),
        "z": cfg.evaluate.z,
        "export": str(_export(r, tok, template, out / "export")) if cfg.preference.export else None,
    }
    if sm is not None and record["export"]:
        record["export"] = _copy_into(Path(record["export"]), Path(sm["model_dir"]))
    atomic_write_json(out / "prefer.json", record)
    if sm is not None and sm.get("output_dir"):
        _copy_into(out / "prefer.json", Path(sm["output_dir"]))
    acc = record["preference_accuracy"]
    show(
        f"prefer: held-out preference accuracy {acc['accuracy']:.3f} ± {acc['accuracy_se']:.3f} (chance 0.5, "
        f"{acc['n']} pairs); chrF++ {record['chrf']['before']:.2f} -> {record['chrf']['after']:.2f} "
        f"({record['chrf']['delta']:+.2f} ± {record['chrf']['delta_se']:.2f}); export {record['export']}"
    )
    return record


def _copy_into(src: Path, folder: Path) -> str:
    """``src`` (a file, or every file of a folder) copied into ``folder`` (made if missing); returns ``folder``."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir() if src.is_dir() else [src]:
        shutil.copy(f, folder / f.name)
    return str(folder)


def _samples(verdict: dict, n: int) -> list[dict]:
    """The first ``n`` held-out answers after preference tuning beside the SFT model's and the reference."""
    before = {r["id"]: r["answer"] for r in verdict.get("sft_answers", [])}
    return [
        {
            "id": r["id"],
            "prompt": r["prompt"],
            "reference": r["reference"],
            "sft": before.get(r["id"]),
            "preference": r["answer"],
        }
        for r in verdict["answers"][:n]
    ]


def _export(result: dict, tok, template: Template, out: Path) -> Path:
    """The run as one merged standalone folder that stops generating at the end-of-turn token."""
    from transformers import GenerationConfig

    from ..export import export_model

    folder = export_model(result["model"], result["final_dir"], out)
    eos = list(dict.fromkeys(i for i in (template["end_of_turn_id"], tok.eos_token_id) if i is not None))
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos[0]
    GenerationConfig(eos_token_id=eos, pad_token_id=pad, do_sample=False).save_pretrained(str(folder))
    return folder


def preference_benchmark(cfg: Config, *, rounds: int = 3, steps: int = 12, threads: int = 1) -> dict:
    """:func:`azllm.bench.prefer.compare_preference` on the run's preference base (the SFT export), its template,
    ``preference.train_method`` and LoRA, written to ``Paths.preference / "bench.json"``. The pairs are shaped like
    the built ones without generating: each native training conversation's reference answer chosen over the next
    one's (the speed of a step depends on the lengths, not on which answer is better)."""
    from ..bench.prefer import compare_preference, pair_tokens
    from ..sft.template import prepare_tokenizer
    from ..utils import atomic_write_json
    from .conversations import sft_data
    from .sft import load_base_tokenizer, lora_kwargs

    base = preference_base(cfg)
    tok = load_base_tokenizer(base)
    prepare_tokenizer(tok, template="auto", name=str(base))
    convs = [c for c in sft_data(cfg, tok)["train"] if c["source"] in cfg.preference.build_sources]
    if len(convs) < 2:
        raise ValueError(f"bench prefer needs 2 or more training conversations of {cfg.preference.build_sources}")
    pairs = [
        {"prompt": c["messages"][:-1], "chosen": c["messages"][-1:], "rejected": convs[i - 1]["messages"][-1:]}
        for i, c in enumerate(convs)
    ]
    spec = preference_spec(cfg, max_steps=steps, resume=False, method="dpo")
    method = cfg.preference.train_method
    res = compare_preference(
        base=base,
        pairs=pairs,
        pair_tokens=pair_tokens(tok, pairs, spec.max_length),
        method=method,
        lora=lora_kwargs(cfg) if method != "full" else {},
        spec={**dataclasses.asdict(spec), "report_to": []},
        rounds=rounds,
        threads=threads,
    )
    path = Paths.of(cfg).preference / "bench.json"
    atomic_write_json(path, res)
    return {**res, "path": str(path)}
