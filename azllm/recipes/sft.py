"""Instruction tuning (notebook 07, ``azllm sft PARAMS``): chat data -> cleaned, decontaminated conversations -> the
base with its chat template -> TRL's ``SFTTrainer`` -> held-out loss, answers and chrF++ -> a merged export.

Reads ``sft`` (and ``model.lora`` / ``model.quant`` / ``model.new_rows`` / ``model.dtype`` / ``model.liger``,
``data.eval``, ``seed``; for the stand-in base, ``adapt`` through :mod:`azllm.recipes.adapt`).

- :func:`base_folder`: ``sft.base``, else the adaptation stage's output, found by its marker or built once
  (:func:`azllm.recipes.stages.require`): the way x method of notebook 05 with the lowest Azerbaijani bits per byte
  (:func:`azllm.recipes.adapt.best_run`; the evaluation recipe's tasks are not used for the choice), exported as one
  folder;
- :func:`sft_tokenizer`: the base's tokenizer with the chat template of training (:mod:`azllm.sft.template`);
- the conversations (read, cleaned, split, decontaminated, length-limited) and their table:
  :mod:`azllm.recipes.conversations`;
- :func:`sft_run`: one run (a finished identical one is returned as is: its folder is named by
  :func:`azllm.sft.train.sft_key`);
- :func:`answers`: the held-out answers and their chrF++ (:mod:`azllm.recipes.judge`: the same before any step,
  before -> after with a paired standard error); :func:`export_sft`: the merged standalone folder;
- :func:`compare_variants`: ``sft.compare``, each variant in its own process (its peak memory is its own);
- :func:`run_row`, :func:`main_record`, :func:`samples`: what notebook 07 shows and records of the runs and answers;
- :func:`sft_job`: the fresh-process entry of one run; :func:`sft_command`: ``azllm sft`` (also inside SageMaker);
  :func:`sft_output`: the stage's output (the run, exported) for the stages after it;
- :func:`sft_benchmark`: azllm's SFT path against a bare ``SFTTrainer`` (:mod:`azllm.bench.sft`, ``azllm bench sft``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from ..config import Config, deep_update
from ..sft.data import SftData
from ..sft.template import Template
from . import stages
from .conversations import sft_data
from .judge import decoding, scored_answers
from .paths import Paths

__all__ = [
    "sft_spec",
    "base_folder",
    "load_base_tokenizer",
    "sft_tokenizer",
    "SftData",
    "sft_run",
    "answers",
    "export_sft",
    "compare_variants",
    "sft_job",
    "sft_command",
    "sft_output",
    "run_row",
    "main_record",
    "samples",
    "sft_benchmark",
    "model_kwargs",
    "lora_kwargs",
]


def sft_spec(
    cfg: Config,
    *,
    packing: bool | None = None,
    max_steps: int | None = None,
    resume: bool | None = None,
):
    """The :class:`~azllm.sft.train.SftSpec` of ``sft`` (:func:`azllm.recipes.specs.build_spec`; the arguments
    override it). The method (full, LoRA, QLoRA) is the model's (:func:`model_kwargs`), not the loop's."""
    from ..sft.train import SftSpec
    from .specs import build_spec

    over = {"max_steps": int(max_steps)} if max_steps else {}
    if packing is not None:
        over["packing"] = packing
    if resume is not None:
        over["resume"] = resume
    return build_spec(SftSpec, cfg.sft, seed=cfg.seed, **over)


# ------------------------------------------------------------------------------------------------------ base


def base_folder(cfg: Config, *, show=lambda line: None) -> tuple[str, dict]:
    """``(base folder or hub id, note)``: ``sft.base``, or the adaptation stage's output (notebook 05's winner,
    :func:`azllm.recipes.adapt.adapted_base`, through :func:`azllm.recipes.stages.require`: its marker when this
    run has one). ``note`` says which and why."""
    if cfg.sft.base:
        return cfg.sft.base, {"base": cfg.sft.base, "how": "sft.base"}
    done = stages.require(cfg, "adapt", show=show)
    return done["artifact"], {**done["note"], "base": done["artifact"]}


def load_base_tokenizer(base: str):
    """The base's tokenizer (``AutoTokenizer``, no remote code), or a clear error (offline, unknown id)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(base), trust_remote_code=False)
    except Exception as e:  # offline, unknown id, gated: many types
        raise ValueError(
            f"could not load the tokenizer of base {base!r}: {type(e).__name__}: "
            f"{str(e).splitlines()[0][:300]}. A hub id needs network access (and HF_TOKEN for a gated "
            "model); offline, set sft.base to a local folder."
        ) from None


def sft_tokenizer(cfg: Config, base: str) -> tuple[object, Template]:
    """``(tokenizer, template info)``: the base's tokenizer with the chat template of training
    (:func:`azllm.sft.template.prepare_tokenizer`)."""
    from ..sft.template import prepare_tokenizer

    tok = load_base_tokenizer(base)
    return tok, prepare_tokenizer(
        tok, template=cfg.sft.template, assistant_only_loss=cfg.sft.assistant_only_loss, name=str(base)
    )


# ------------------------------------------------------------------------------------------------------ runs


def model_kwargs(cfg: Config) -> dict:
    """The keyword arguments of :func:`azllm.sft.train.prepare_model` from the ``model`` section (and SFT's
    gradient checkpointing); preference tuning builds its model the same way."""
    m = cfg.model
    return dict(
        dtype=m.dtype,
        liger=tuple(m.liger.kernels()),
        quant_bits=m.quant.bits,
        quant_type=m.quant.quant_type,
        double_quant=m.quant.double_quant,
        compute_dtype=m.quant.compute_dtype,
        kbit_fp32_rest=m.quant.kbit_fp32_rest,
        gradient_checkpointing=cfg.sft.gradient_checkpointing,
    )


def lora_kwargs(cfg: Config) -> dict:
    """The keyword arguments of :func:`azllm.sft.train.lora_config` from ``model.lora`` and ``model.new_rows``."""
    lo = cfg.model.lora
    return dict(
        r=lo.r,
        alpha=lo.alpha,
        dropout=lo.dropout,
        use_rslora=lo.use_rslora,
        target_modules=lo.target_modules or "all-linear",
        new_rows=cfg.model.new_rows,
    )


def sft_run(
    cfg: Config,
    *,
    base: str,
    tokenizer,
    template: Template,
    data: SftData,
    method: str | None = None,
    packing: bool | None = None,
    max_steps: int | None = None,
    output_dir: str | os.PathLike | None = None,
    resume: bool | None = None,
    progress: bool = True,
) -> dict:
    """One SFT run on ``data`` (:func:`sft_data`) from ``base`` (a finished identical run is returned as is)."""
    from ..lifecycle import finished_result
    from ..sft.train import lora_config, prepare_model, run_sft, sft_key
    from ..utils import seed_everything

    method = method or cfg.sft.method
    spec = sft_spec(cfg, packing=packing, max_steps=max_steps, resume=resume)
    desc = {
        "base": str(base),
        "method": method,
        **model_kwargs(cfg),
        **(lora_kwargs(cfg) if method != "full" else {}),
        "template": template["template"],
        "chat_template": tokenizer.chat_template,
    }
    key = sft_key(model=desc, spec=spec, data=data["key"])
    out = Path(output_dir) if output_dir else Paths.of(cfg).sft / f"{method}{'-packed' if spec.packing else ''}-{key}"
    done = finished_result(out, key) if spec.resume else None
    if done is not None:
        return done
    seed_everything(cfg.seed)
    new_ids = template["added_tokens"]
    model, info = prepare_model(base, method=method, new_token_ids=new_ids, **model_kwargs(cfg))
    peft = lora_config(model, new_token_ids=new_ids, **lora_kwargs(cfg)) if method != "full" else None
    return run_sft(
        model,
        tokenizer,
        spec,
        train_convs=data["train"],
        eval_convs=data["held_out"],
        output_dir=out,
        key=key,
        peft_config=peft,
        info={**info, "template": template["template"]},
        end_of_turn_id=template["end_of_turn_id"],
        progress=progress,
    )


def _trained(result: dict, base: str, template: Template):
    if result.get("model") is not None:
        return result["model"]
    from ..sft.train import load_sft_model

    return load_sft_model(result["final_dir"], base=base, new_token_ids=template["added_tokens"])


def answers(cfg: Config, result: dict, *, base: str, tokenizer, template: Template, data: SftData) -> dict:
    """The held-out answers of a run and their chrF++: ``{"rows": [...], "chrf++"}`` (rows carry their own
    score), cached next to the run's results."""
    import json

    from ..utils import atomic_write_json

    path = Path(result["output_dir"]) / "answers.json"
    if path.is_file():
        got = json.loads(path.read_text())
        if got.get("key") == result["key"] and got.get("decoding") == decoding(cfg):
            return got
    got = {
        "key": result["key"],
        "decoding": decoding(cfg),
        **scored_answers(cfg, _trained(result, base, template), tokenizer, template, data),
    }
    atomic_write_json(path, got)
    return got


def export_sft(
    cfg: Config, result: dict, *, base: str, tokenizer, template: Template, out_dir: str | os.PathLike | None = None
) -> Path:
    """The run as one merged standalone folder (:func:`azllm.export.export_model`: safetensors, the tokenizer and
    its chat template) with a generation config that stops at the end-of-turn token. Written into the run's own
    folder (no ``out_dir``), it is the SFT stage's output: its marker is written (:func:`azllm.recipes.stages.mark`),
    which preference tuning and distillation's ``sft`` teacher find it by, and the folder records the run's key
    (``azllm_export.json``, written last): an export of the same run is returned as it is, not written again, so
    that what is cached by its weights (:func:`azllm.utils.weights_id`: preference runs, scores, answers) stays
    valid when only the params hash changes."""
    from transformers import GenerationConfig

    from ..export import export_model
    from ..utils import atomic_write_json

    out = Path(out_dir) if out_dir else Path(result["output_dir"]) / "export"
    marker, record = out / "azllm_export.json", {"key": result["key"], "template": template["template"]}
    if out_dir or not (marker.is_file() and json.loads(marker.read_text()) == record):
        folder = export_model(_trained(result, base, template), result["final_dir"], out)
        eos = list(dict.fromkeys(i for i in (template["end_of_turn_id"], tokenizer.eos_token_id) if i is not None))
        GenerationConfig(
            eos_token_id=eos,
            pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0],
            do_sample=False,
        ).save_pretrained(str(folder))
    if not out_dir:
        atomic_write_json(marker, record)
        stages.mark(cfg, "sft", out, results=str(Path(result["output_dir"]) / "results.json"), base=str(base))
    return out


# ------------------------------------------------------------------------------------------ what notebook 07 shows


def run_row(result: dict) -> dict:
    """One SFT run (:func:`sft_run` / :func:`sft_job`) in one row: method, packing, steps, real tokens/s, peak
    memory (CUDA allocated on a GPU, else the CPU's RSS; MiB), held-out loss on assistant tokens (the best
    checkpoint's) and its step, chrF++ of the held-out answers (``chrf``), trainable parameters, the loss-carrying
    share of the training tokens, wall time."""
    t = result["throughput"]
    return {
        "method": result["method"],
        "packing": bool(result["packing"]),
        "steps": result["steps"],
        "tokens_per_s": t.get("tokens_per_s"),
        "peak_mb": t.get("cuda_max_allocated_mb", t.get("peak_rss_mb")),
        "eval_loss": result["eval_loss"],
        "best_step": result["best_step"],
        "chrf": result.get("chrf++"),
        "trainable": result["parameters"]["trainable"],
        "loss_share": result["mask"]["share"],
        "wall_s": result["seconds"],
    }


def main_record(result: dict, answers: dict) -> dict:
    """What notebook 07 records of its main run: :func:`run_row` with the chrF++ of its held-out answers
    (:func:`answers`), the loss mask's counts, the chrF++ and the share of answers that stopped at the end of turn."""
    return {
        "main": run_row({**result, "chrf++": answers["chrf++"]}),
        "mask": result["mask"],
        "chrf": answers["chrf++"],
        "stopped_share": answers["stopped_share"],
    }


def samples(answers: dict, n: int, before: dict | None = None) -> list[dict]:
    """The first ``n`` held-out answers (:func:`answers`) next to their references, with their chrF++; given
    ``before`` (:func:`base_answers`), the base's answer to the same instruction before SFT and its chrF++."""
    rows = []
    for i, a in enumerate(answers["rows"][:n]):
        row = {"instruction": a["prompt"]}
        if before is not None:
            b = before["rows"][i]
            if b["prompt"] != a["prompt"]:
                raise ValueError(f"answer {i}: the base's and the SFT model's held-out instructions differ")
            row.update({"before_answer": b["answer"], "before_chrf": b["chrf++"]})
        rows.append({**row, "answer": a["answer"], "chrf": a["chrf++"], "reference": a["reference"]})
    return rows


# ------------------------------------------------------------------------------------------------- variants


def sft_job(job: dict) -> dict:
    """Fresh-process entry (:func:`azllm.bench.process.run_fresh`) of one run: ``job`` holds ``params`` (a config as
    :meth:`Config.to_dict`), ``base``, ``method``, ``packing``, ``max_steps``. Returns the run's JSON results with
    the chrF++ of its held-out answers."""
    cfg = Config.model_validate(job["params"])
    tok, template = sft_tokenizer(cfg, job["base"])
    data = sft_data(cfg, tok)
    r = sft_run(
        cfg,
        base=job["base"],
        tokenizer=tok,
        template=template,
        data=data,
        method=job.get("method"),
        packing=job.get("packing"),
        max_steps=job.get("max_steps"),
        progress=False,
    )
    a = answers(cfg, r, base=job["base"], tokenizer=tok, template=template, data=data)
    return {**{k: v for k, v in r.items() if k not in ("model", "trainer")}, "chrf++": a["chrf++"]}


def compare_variants(cfg: Config, base: str, *, show=None) -> list[dict]:
    """``sft.compare``: every variant for ``sft.compare_steps`` steps in its own process."""
    from ..bench.process import ok_or_raise, run_fresh

    out = []
    for v in cfg.sft.compare:
        if show:
            show(f"sft variant {v.method}{' packed' if v.packing else ''}")
        res = run_fresh(
            "azllm.recipes.sft:sft_job",
            {
                "params": cfg.to_dict(),
                "base": str(base),
                "method": v.method,
                "packing": v.packing,
                "max_steps": cfg.sft.compare_steps,
            },
        )
        out.append(ok_or_raise(res, f"sft variant {v.method} packing={v.packing}"))
    return out


def sft_benchmark(
    cfg: Config, *, rounds: int = 3, steps: int = 40, threads: int = 1, show_progress: bool = True
) -> dict:
    """:func:`azllm.bench.sft.compare_sft` on the run's base, template, training conversations, method and LoRA
    (``sft.method``, ``sft.packing``), written to ``Paths.sft / "bench.json"``."""
    from ..bench.sft import compare_sft
    from ..utils import atomic_write_json

    base, _ = base_folder(cfg)
    tok, template = sft_tokenizer(cfg, base)
    data = sft_data(cfg, tok)
    spec = {**dataclasses.asdict(sft_spec(cfg, max_steps=steps, resume=False)), "report_to": []}
    res = compare_sft(
        base=base,
        conversations=data["train"],
        method=cfg.sft.method,
        lora=lora_kwargs(cfg) if cfg.sft.method != "full" else {},
        spec=spec,
        template=cfg.sft.template,
        rounds=rounds,
        threads=threads,
        show_progress=show_progress,
    )
    path = Paths.of(cfg).sft / "bench.json"
    atomic_write_json(path, res)
    return {**res, "path": str(path)}


# ----------------------------------------------------------------------------------------------- the stage's output


def sft_output(cfg: Config, *, show=lambda line: None) -> Path:
    """The SFT stage's output for the stages after it (preference tuning, distillation's ``sft`` teacher, deploying
    ``sft``), built through :func:`azllm.recipes.stages.require` when this run has none: the main run (a finished one
    is returned as it is) exported into its folder (:func:`export_sft`, which writes the marker), whatever
    ``sft.export`` says; no answers are generated. Returns the export's folder."""
    base, _ = base_folder(cfg, show=show)
    tok, template = sft_tokenizer(cfg, base)
    data = sft_data(cfg, tok)
    r = sft_run(cfg, base=base, tokenizer=tok, template=template, data=data)
    if r.get("interrupted"):
        raise stages.StageError(
            f"the SFT run was interrupted by {r['interrupted']} at step {r['steps']} (a complete checkpoint was "
            "written): run again to resume it"
        )
    folder = export_sft(cfg, r, base=base, tokenizer=tok, template=template)
    show(f"sft: the export in {folder}")
    return folder


# ----------------------------------------------------------------------------------------------- command line


def sft_command(cfg: Config, *, environ=None, show=print) -> dict:
    """``azllm sft PARAMS``: the main run, its answers and its export. Inside a SageMaker job
    (:func:`azllm.sagemaker.job_paths`) the ``data`` channel is the data root, checkpoints go to the synced folder
    (a restarted spot job resumes there) and the merged export to ``SM_MODEL_DIR``, ``results.json`` and
    ``answers.json`` to ``SM_OUTPUT_DATA_DIR``. Returns the run's results (``interrupted`` on SIGTERM)."""
    import shutil

    from .. import sagemaker

    sm = sagemaker.job_paths(environ)
    if sm is not None and sm.get("data"):
        cfg = Config.model_validate(deep_update(cfg.to_dict(), {"data": {"root": sm["data"]}}))
    base, note = base_folder(cfg, show=show)
    tok, template = sft_tokenizer(cfg, base)
    data = sft_data(cfg, tok)
    show(
        f"sft: base {base} ({note['how']}); template {template['template']}; {len(data['train'])} training and "
        f"{len(data['held_out'])} held-out conversations"
    )
    r = sft_run(
        cfg, base=base, tokenizer=tok, template=template, data=data, output_dir=sm["checkpoints"] if sm else None
    )
    if r.get("interrupted"):
        return r
    a = answers(cfg, r, base=base, tokenizer=tok, template=template, data=data)
    show(f"sft: held-out loss {r['eval_loss']:.4f} (best step {r['best_step']}), chrF++ {a['chrf++']:.1f}")
    if cfg.sft.export and (sm is None or os.environ.get("RANK", "0") == "0"):
        folder = export_sft(
            cfg,
            r,
            base=base,
            tokenizer=tok,
            template=template,
            out_dir=Path(sm["model_dir"]) / "export" if sm else None,
        )
        if sm is not None:
            for f in folder.iterdir():
                shutil.copy(f, Path(sm["model_dir"]) / f.name)
            shutil.rmtree(folder)
            folder = Path(sm["model_dir"])
            if sm.get("output_dir"):
                Path(sm["output_dir"]).mkdir(parents=True, exist_ok=True)
                for name in ("results.json", "answers.json"):
                    shutil.copy(Path(r["output_dir"]) / name, Path(sm["output_dir"]) / name)
        show(f"sft: merged export in {folder}")
        r = {**r, "export": str(folder)}
    return r
