"""One training run (notebook 03, ``azllm train PARAMS``): the params -> a :class:`~azllm.assemble.ModelSpec` and a
:class:`~azllm.train.TrainSpec` -> :func:`azllm.assemble.assemble_model` -> :func:`azllm.train.run_training`.

Reads ``model``, ``train`` and ``seed``. :func:`model_spec` and :func:`train_spec` are the one place where those
sections become library arguments; :func:`train_model` runs one training (a finished identical run is returned as
it is: the output folder is named by :func:`azllm.train.run_key`). :func:`train_job` is its fresh-process entry,
:func:`job_config` lays a SageMaker job's folders over the params, :func:`distributed_guard` refuses known-bad
launches before anything is built. What notebook 03 records: :func:`data_summary` (the token files), :func:`run_summary`
(one run), :func:`curves` (the loss curves with bits per byte).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..assemble import ModelSpec
from ..config import Config, deep_update
from ..lifecycle import RunResult
from .paths import Paths
from .specs import build_spec

if TYPE_CHECKING:
    from ..train import TrainSpec

__all__ = [
    "model_spec",
    "train_spec",
    "train_model",
    "train_job",
    "job_config",
    "distributed_guard",
    "data_summary",
    "run_summary",
    "curves",
]


def model_spec(cfg: Config, method: str | None = None, base: str | os.PathLike | None = None) -> ModelSpec:
    """The :class:`~azllm.assemble.ModelSpec` of the params (``method`` defaults to ``train.method``, ``base`` to
    ``model.base``), by :func:`azllm.recipes.specs.build_spec` over ``model`` (``model.lora`` and ``model.quant``
    prefixed) and ``train``."""
    m = cfg.model
    base = base or m.base
    return build_spec(
        ModelSpec,
        m,
        cfg.train,
        prefixed={"lora_": m.lora, "quant_": m.quant},
        method=method or cfg.train.method,
        base=str(base) if base else None,
        liger=tuple(m.liger.kernels()),
        seed=cfg.seed,
    )


def train_spec(
    cfg: Config,
    *,
    method: str | None = None,
    max_steps: int | None = None,
    lr: float | None = None,
    resume: bool | None = None,
) -> TrainSpec:
    """The :class:`~azllm.train.TrainSpec` of ``train`` (``max_steps`` / ``lr`` / ``resume`` override it), by
    :func:`azllm.recipes.specs.build_spec`. The two-stage ``rows_only_steps`` applies to adapters only."""
    from ..train import TrainSpec

    t = cfg.train
    method = method or t.method
    over = {"max_steps": int(max_steps)} if max_steps else {}
    if lr is not None:
        over["lr"] = float(lr)
    if resume is not None:
        over["resume"] = resume
    if method == "full":
        over["rows_only_steps"] = 0
    return build_spec(TrainSpec, t, seed=cfg.seed, **over)


def distributed_guard(cfg: Config, env: dict | None = None) -> None:
    """Refuse known-bad combinations of the launch (read from accelerate's environment) and the params, before
    anything is built: Liger's fused linear cross-entropy under DeepSpeed ZeRO-3 reads an lm_head weight that
    ZeRO-3 has sharded away (linkedin/Liger-Kernel issues, huggingface/trl#3368)."""
    env = os.environ if env is None else env
    zero3 = (
        env.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true" and env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3"
    )
    if zero3 and cfg.model.liger.fused_linear_cross_entropy:
        raise ValueError(
            "model.liger.fused_linear_cross_entropy under DeepSpeed ZeRO-3: the kernel reads the "
            "sharded lm_head weight directly and would compute a wrong loss. Use ZeRO-2 or FSDP "
            "(accelerate/deepspeed_zero2.yaml, accelerate/fsdp.yaml), or switch the kernel off."
        )


def train_model(
    cfg: Config,
    data: dict,
    *,
    method: str | None = None,
    base: str | os.PathLike | None = None,
    max_steps: int | None = None,
    lr: float | None = None,
    output_dir: str | os.PathLike | None = None,
    resume: bool | None = None,
    callbacks=(),
    progress: bool = True,
) -> RunResult:
    """Train one model on :func:`azllm.recipes.tokens.prepare_data`'s files; a finished identical run is returned
    as is. Output folder: :meth:`Paths.run` ``(method, key)``. Returns :func:`azllm.train.run_training`'s
    results."""
    from ..assemble import assemble_model
    from ..lifecycle import finished_result
    from ..tokens import read_header
    from ..train import run_key, run_training
    from ..utils import seed_everything

    distributed_guard(cfg)
    tok = data["tokenizer"]
    mspec = model_spec(cfg, method, base)
    tspec = train_spec(cfg, method=mspec.method, max_steps=max_steps, lr=lr, resume=resume)
    dev = {k: v for k, v in data["dev"].items() if cfg.train.dev_sets is None or k in cfg.train.dev_sets}
    key = run_key(
        model=mspec.to_dict(),
        train=tspec,
        tokenizer=tok.fingerprint,
        data={k: read_header(data[k]).get("key") for k in ("train", "val")},
        eval_sets=sorted(dev),
    )
    out = Path(output_dir) if output_dir else Paths.of(cfg).run(mspec.method, key)
    done = finished_result(out, key) if tspec.resume else None
    if done is not None:
        return done
    seed_everything(cfg.seed)
    model, info = assemble_model(mspec, tok)
    return run_training(
        model,
        tspec,
        tokenizer=tok,
        train_file=data["train"],
        eval_files={"val": data["val"], **dev},
        output_dir=out,
        key=key,
        info=info,
        callbacks=callbacks,
        progress=progress,
    )


def train_job(job: dict) -> dict:
    """Fresh-process entry (:func:`azllm.bench.process.run_fresh`) of one training run: ``job`` holds ``params``
    (a config as :meth:`Config.to_dict`) and ``method`` / ``base`` / ``max_steps`` / ``lr`` / ``output_dir``.
    Returns the JSON results of :func:`train_model`."""
    from .tokens import prepare_data

    cfg = Config.model_validate(job["params"])
    r = train_model(
        cfg,
        prepare_data(cfg, progress=False),
        method=job.get("method"),
        base=job.get("base"),
        max_steps=job.get("max_steps"),
        lr=job.get("lr"),
        output_dir=job.get("output_dir"),
        progress=False,
    )
    return {k: v for k, v in r.items() if k not in ("model", "trainer")}


def job_config(cfg: Config, sm: dict) -> Config:
    """The run's config inside a SageMaker job (:func:`azllm.sagemaker.job_paths`): the ``data`` input channel
    becomes ``data.root``; the ``tokens`` channel (a folder of ``azllm prepare``) becomes ``tokens.dir``, and
    without one the token files are prepared beside the checkpoints (``<checkpoints>/prepared``, which SageMaker
    keeps in S3), so that a restarted spot job opens them instead of preparing again."""
    changes: dict = {}
    if sm.get("data"):
        changes["data"] = {"root": sm["data"]}
    if sm.get("tokens"):
        changes["tokens"] = {"dir": sm["tokens"]}
    elif sm.get("checkpoints") and not cfg.tokens.dir:
        changes["tokens"] = {"dir": str(Path(sm["checkpoints"]) / "prepared")}
    return Config.model_validate(deep_update(cfg.to_dict(), changes)) if changes else cfg


# ------------------------------------------------------------------------------------------- what a run measured


def data_summary(data: dict, train_bytes_per_token: float) -> dict:
    """The run's tokenizer and token files (:func:`azllm.recipes.tokens.prepare_data`) in one row, with the bytes
    per token of the training file (:func:`azllm.train.bytes_per_token`)."""
    enc = data["encode"]
    return {
        "tokenizer_vocab": data["tokenizer"].vocab_size,
        "train_tokens": enc["train_tokens"],
        "val_tokens": enc["val_tokens"],
        "train_bytes_per_token": round(train_bytes_per_token, 3),
        "dev_sets": ", ".join(data["dev"]) or "none",
    }


def run_summary(result: dict) -> dict:
    """The numbers of one :func:`train_model` result that the report shows and records: method, parameters, steps,
    time, tokens/s, step time, peak memory (RSS; CUDA allocated/reserved on a GPU), Liger flags, the first
    evaluated val loss, and ``final``: per eval set (by its name) the final loss, perplexity, bits per byte and
    the bits per byte of a uniform guess over the vocabulary."""
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
    out["final"] = {name: dict(f) for name, f in result["final"].items()}
    return out


def curves(result: dict, train_bytes_per_token: float) -> dict:
    """The run's curves for the plots: the logged training loss with an approximate bits per byte (``loss / ln 2 /
    train_bytes_per_token``; the evaluations' bits per byte are exact) and every evaluated set as logged."""
    import math

    return {
        "train": [
            {**p, "bpb_approx": p["loss"] / math.log(2) / train_bytes_per_token} for p in result["curves"]["train"]
        ],
        "eval": result["curves"]["eval"],
    }
