"""A params file as an Amazon SageMaker training job: ``python -m azllm launch params/x.yaml [--dry-run]``.

It builds a ``sagemaker.train.ModelTrainer`` (SageMaker Python SDK 3, the ``azllm[sagemaker]`` extra) from the
``launch`` section and ``benchmark.job``, prints what the whole job costs, writes the job description
(``artifacts/<run_name>/launch/job.json``, secrets redacted) and starts the job (``--dry-run``: everything but the
start, with no AWS call at all). What the trainer holds:

- ``SourceCode(source_dir, entry_script, requirements)``: a folder staged next to job.json with the ``azllm``
  package, the params file as ``params.yaml``, requirements.lock as ``requirements.txt`` (installed when the job
  starts) and a small entry script that runs ``python -m azllm train params.yaml`` (``azllm sft`` with
  ``launch.command: sft``: instruction tuning, :func:`azllm.recipes.sft.sft_command`) (:mod:`azllm.sagemaker` then
  maps the job's folders, :func:`azllm.recipes.train.job_config`);
- ``Torchrun(process_count_per_node=benchmark.job.gpus_per_instance)``: one process per GPU on every node (the SDK's
  driver passes the hyperparameters ``params``, ``run_name``, ``params_hash`` as ``--key value``);
- ``Compute(instance_type, instance_count, volume_size_in_gb, enable_managed_spot_training)`` from
  ``benchmark.job.instance``/``instances`` and ``launch.volume_gb``/``spot``;
  ``StoppingCondition(max_runtime_in_seconds, max_wait_time_in_seconds)``;
- ``CheckpointConfig(s3_uri, local_path)``: the entry keeps its checkpoints in ``local_path`` (AZLLM_CHECKPOINT_DIR),
  SageMaker syncs the folder to S3 and back into a restarted spot job, which resumes from the last complete one;
- ``InputData`` channels ``data`` (a data root) and ``tokens`` (token files): SM_CHANNEL_DATA, SM_CHANNEL_TOKENS;
- ``environment``: ``launch.environment``, AZLLM_CHECKPOINT_DIR and the launcher's own variables named in
  ``launch.forward_env`` (HF_TOKEN). Secrets come only from the launcher's environment (the params loader refuses
  them); job.json and the printed description show them redacted.

The image: no AWS image carries our pins (torch 2.13, transformers 5.x). The Hugging Face PyTorch training DLC
has torch 2.9 with transformers 5.3; the newest PyTorch training DLC in the SDK's image table is PyTorch 2.10 on
Python 3.13 (``sagemaker.core.image_uris.retrieve("pytorch", region, "2.10.0", "py313", instance_type=...,
image_scope="training")``). ``launch.image`` is that DLC (CUDA driver compatibility, NCCL, EFA for p4d/p5 nodes)
and requirements.lock is installed over it at start, so the job runs the versions the tests ran (every pin has a
Linux wheel for Python 3.12 and 3.13): a few minutes of pip per start and per spot restart. An image built from the
DLC with the lock installed would save them; set ``launch.image`` to it.

The cost (:func:`estimate`, :func:`azllm.memory.job_cost`): tokens = steps x batch x grad_accum x block x processes,
at ``benchmark.job.tokens_per_s`` per GPU, on-demand vs spot prices of ``benchmark.job``, plus S3 storage of
``train.save_total_limit`` checkpoints of the memory model's size (weights and AdamW states).

AWS calls (SDK 3.27, read in its source): constructing a ModelTrainer for a training job creates a Session (it
needs a region; its boto3 clients look up credentials, the EC2 metadata endpoint included), takes a role ARN as it
is (a role name is looked up with IAM), validates the role with IAM unless ``SAGEMAKER_VALIDATE_ROLE=false`` and,
without an output path, asks STS and S3 for a default bucket. The output path is always given here; ``--dry-run``
sets ``SAGEMAKER_VALIDATE_ROLE=false`` and ``AWS_EC2_METADATA_DISABLED=true`` while it builds, so it makes no network
call at all (tested with sockets and botocore calls refused). ``train()`` uploads the staged code to the output
bucket and creates the job.

The extra is not in requirements.lock: every sagemaker-core 2.x declares protobuf<7, and the pinned sentencepiece
0.2.3 needs protobuf>=7.36.1 (see docs/scale-out.md, SageMaker). The job never needs the SDK.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from enum import Enum
from pathlib import Path

from .. import memory as mem
from ..config import Config, ParamsError, load_params
from ..utils import REPO_ROOT, atomic_write_text
from .paths import Paths

__all__ = [
    "launch",
    "stage_source",
    "build_trainer",
    "describe",
    "estimate",
    "cost_lines",
    "checkpoint_bytes",
    "ENTRY_SCRIPT",
    "PARAMS_NAME",
    "REDACTED",
]

ENTRY_SCRIPT = "azllm_train.py"
PARAMS_NAME = "params.yaml"
REDACTED = "<redacted: from the launcher's environment>"
_ENTRY = '''"""SageMaker entry written by azllm.recipes.launch: ``python -m azllm COMMAND params.yaml`` in every
process that the
SDK's torchrun driver starts. The driver passes the job's hyperparameters as ``--key value``: ``--params`` names the
params file beside this script; ``--run_name`` and ``--params_hash`` are only recorded."""
import argparse

from azllm.cli import main
from azllm.utils import exit_now

COMMAND = "train"

if __name__ == "__main__":   # the corpus stage's worker processes import this module: run nothing then
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", default="params.yaml")
    args, _recorded = ap.parse_known_args()
    exit_now(main([COMMAND, args.params]))
'''


def _sdk():
    """The SageMaker SDK classes used here (the ``azllm[sagemaker]`` extra)."""
    try:
        import boto3
        from sagemaker.core.helper.session_helper import Session
        from sagemaker.core.training.configs import (
            CheckpointConfig,
            Compute,
            InputData,
            OutputDataConfig,
            SourceCode,
            StoppingCondition,
        )
        from sagemaker.train import ModelTrainer
        from sagemaker.train.distributed import Torchrun
    except ImportError as e:
        raise ImportError(
            f"python -m azllm launch needs the SageMaker SDK, the azllm[sagemaker] extra (see the "
            f"docs/scale-out.md, SageMaker): {e}"
        ) from e
    return dict(
        boto3=boto3,
        Session=Session,
        CheckpointConfig=CheckpointConfig,
        Compute=Compute,
        InputData=InputData,
        OutputDataConfig=OutputDataConfig,
        SourceCode=SourceCode,
        StoppingCondition=StoppingCondition,
        ModelTrainer=ModelTrainer,
        Torchrun=Torchrun,
    )


def stage_source(
    params_file: str | os.PathLike,
    dest: str | os.PathLike,
    *,
    lock: str | os.PathLike = REPO_ROOT / "requirements.lock",
    command: str = "train",
) -> Path:
    """The job's code folder ``dest`` (replaced): the azllm package, the params file as ``params.yaml``, the lock as
    ``requirements.txt`` and the entry script (running ``azllm <command> params.yaml``: ``launch.command``)."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(
        Path(__file__).resolve().parents[1], dest / "azllm", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    shutil.copy(params_file, dest / PARAMS_NAME)
    shutil.copy(lock, dest / "requirements.txt")
    (dest / ENTRY_SCRIPT).write_text(_ENTRY.replace('COMMAND = "train"', f"COMMAND = {command!r}"))
    return dest


def _check(cfg: Config, *, dry_run: bool) -> None:
    """Refuse a launch section that SageMaker would refuse later (or that would launch placeholders)."""
    section = cfg.launch
    if not section.role or not section.output_s3_uri:
        raise ParamsError("launch.role (an IAM role ARN) and launch.output_s3_uri are needed to build the job")
    for key in ("output_s3_uri", "checkpoint_s3_uri", "data_s3_uri", "tokens_s3_uri"):
        uri = getattr(section, key)
        if uri is not None and not uri.startswith("s3://"):
            raise ParamsError(f"launch.{key}: an s3:// URI, got {uri!r}")
    if section.spot and section.max_wait_hours < section.max_run_hours:
        raise ParamsError(
            f"launch.max_wait_hours ({section.max_wait_hours}) must be at least launch.max_run_hours "
            f"({section.max_run_hours}) for a spot job"
        )
    m = re.search(r"\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com", section.image)
    if m and m.group(1) != section.region:
        raise ParamsError(f"launch.image is in {m.group(1)}, the job runs in launch.region {section.region}")
    placeholders = [k for k, v in section.model_dump().items() if isinstance(v, str) and "YOUR-" in v]
    if placeholders and not dry_run:
        raise ParamsError(f"launch.{', launch.'.join(placeholders)} still hold placeholders (YOUR-...)")


def job_environment(environment: dict, forward: list[str], checkpoint_dir: str, environ) -> tuple[dict, dict]:
    """The job's environment and, separately, the secrets in it: ``forward`` names copied from ``environ``."""
    secrets = {k: environ[k] for k in forward if environ.get(k)}
    return {**environment, "AZLLM_CHECKPOINT_DIR": checkpoint_dir, **secrets}, secrets


@contextlib.contextmanager
def _offline(on: bool):
    """While building: no IAM role check and no EC2 metadata lookup for credentials (``on``), else nothing."""
    keys = {"SAGEMAKER_VALIDATE_ROLE": "false", "AWS_EC2_METADATA_DISABLED": "true"} if on else {}
    old = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def build_trainer(cfg: Config, source_dir: str | os.PathLike, *, environ=None, offline: bool = False):
    """``(ModelTrainer, secrets)`` of the run: see the module docstring for what it holds. ``offline``: build it
    without any AWS call (no role check; credentials are not looked up on the EC2 metadata endpoint)."""
    sdk, section, job = _sdk(), cfg.launch, cfg.benchmark.job
    env, secrets = job_environment(
        section.environment,
        section.forward_env,
        section.checkpoint_local_path,
        os.environ if environ is None else environ,
    )
    channels = [
        sdk["InputData"](channel_name=name, data_source=uri)
        for name, uri in (("data", section.data_s3_uri), ("tokens", section.tokens_s3_uri))
        if uri
    ]
    bucket = section.output_s3_uri.removeprefix("s3://").split("/")[0]
    with _offline(offline):
        session = sdk["Session"](boto_session=sdk["boto3"].Session(region_name=section.region), default_bucket=bucket)
        trainer = sdk["ModelTrainer"](
            sagemaker_session=session,
            role=section.role,
            training_image=section.image,
            base_job_name=section.base_job_name or re.sub(r"[^A-Za-z0-9-]", "-", f"azllm-{cfg.run_name}")[:40],
            source_code=sdk["SourceCode"](
                source_dir=str(source_dir), entry_script=ENTRY_SCRIPT, requirements="requirements.txt"
            ),
            distributed=sdk["Torchrun"](process_count_per_node=job.gpus_per_instance),
            compute=sdk["Compute"](
                instance_type=job.instance,
                instance_count=job.instances,
                volume_size_in_gb=section.volume_gb,
                enable_managed_spot_training=section.spot,
            ),
            stopping_condition=sdk["StoppingCondition"](
                max_runtime_in_seconds=int(section.max_run_hours * 3600),
                max_wait_time_in_seconds=int(section.max_wait_hours * 3600) if section.spot else None,
            ),
            checkpoint_config=sdk["CheckpointConfig"](
                s3_uri=section.checkpoint_s3_uri, local_path=section.checkpoint_local_path
            ),
            output_data_config=sdk["OutputDataConfig"](s3_output_path=section.output_s3_uri),
            input_data_config=channels or None,
            environment=env,
            hyperparameters={"params": PARAMS_NAME, "run_name": cfg.run_name, "params_hash": cfg.hash()},
        )
    return trainer, secrets


def _plain(v):
    """JSON-able copy of SDK objects: pydantic shapes as dicts of their set fields, enums as names."""
    from pydantic import BaseModel
    from sagemaker.core.utils.utils import Unassigned

    if isinstance(v, BaseModel):
        return {k: _plain(x) for k, x in vars(v).items() if x is not None and not isinstance(x, Unassigned)}
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, Enum):
        return v.name
    return v if v is None or isinstance(v, (str, int, float, bool)) else str(v)


def _redact(v, values: set[str]):
    """``v`` with every string that contains one of ``values`` replaced by :data:`REDACTED`."""
    if isinstance(v, dict):
        return {k: _redact(x, values) for k, x in v.items()}
    if isinstance(v, list):
        return [_redact(x, values) for x in v]
    return REDACTED if isinstance(v, str) and any(s in v for s in values) else v


def describe(trainer, secrets: dict) -> dict:
    """The ModelTrainer's configuration as JSON-able dicts (what SageMaker is asked to run), ``secrets`` redacted."""
    skip = {"sagemaker_session", "config_mgr", "local_container_root"}
    d = {k: _plain(getattr(trainer, k)) for k in type(trainer).model_fields if k not in skip}
    if trainer.distributed is not None:
        d["distributed"] = {"type": type(trainer.distributed).__name__, **d["distributed"]}
    return _redact(d, {v for v in secrets.values() if v})


def checkpoint_bytes(cfg: Config) -> float | None:
    """Bytes of one checkpoint by the memory model: the trainable weights (adapters only for LoRA/QLoRA) and their
    AdamW states, as in notebook 04's job cost; None for a pretrained base (its shape is not in the params)."""
    from ..model import model_config

    model, train = cfg.model, cfg.train
    if model.base:
        return None
    shape = model_config(model.preset, cfg.tokenizer.vocab_size, **model.config)
    name = {"full": "baseline", "lora": "lora", "qlora": "qlora" if model.quant.bits == 4 else "qlora8"}[train.method]
    variant = mem.parse_variant(
        name,
        dtype=model.dtype,
        optimizer=train.optimizer,
        lora_r=model.lora.r,
        kbit_fp32_rest=model.quant.kbit_fp32_rest,
    )
    return mem.checkpoint_bytes(mem.predict_memory(shape, variant, batch=1, seq=1), adapters=train.method != "full")


def _sft_checkpoint_bytes(cfg: Config, method: str | None = None) -> float | None:
    """One SFT (or preference, with its ``method``) checkpoint by the memory model: the base shape
    ``sft.plan_preset`` (a hub base's shape is not in the params) at ``sft.plan_vocab_size``, the trainable weights
    (adapters for LoRA/QLoRA) and their AdamW states."""
    from ..model import model_config

    s = cfg.sft
    method = method or s.method
    if not s.plan_preset:
        return None
    shape = model_config(s.plan_preset, s.plan_vocab_size)
    name = {"full": "baseline", "lora": "lora", "qlora": "qlora" if cfg.model.quant.bits == 4 else "qlora8"}[method]
    variant = mem.parse_variant(name, dtype=cfg.model.dtype, optimizer=s.optimizer, lora_r=cfg.model.lora.r)
    return mem.checkpoint_bytes(mem.predict_memory(shape, variant, batch=1, seq=1), adapters=method != "full")


def estimate(cfg: Config) -> dict:
    """The whole job priced by :func:`azllm.memory.job_cost` (no cost keys when ``benchmark.job.tokens_per_s`` is
    unset): tokens of ``train`` (``sft`` for ``launch.command: sft``: its steps x batch x ``max_length``, an upper
    bound, since conversations are shorter unless packed; ``preference`` for ``prefer``: twice that, a chosen and a
    rejected answer per pair) on every process, tokens/s per GPU x processes,
    ``benchmark.job`` prices."""
    job = cfg.benchmark.job
    world = job.gpus_per_instance * job.instances
    if cfg.launch.command == "sft":
        s = cfg.sft
        steps, per_step = s.max_steps, s.batch_size * s.grad_accum * s.max_length * world
        ckpt, keep = _sft_checkpoint_bytes(cfg), s.save_total_limit
    elif cfg.launch.command == "prefer":  # a chosen and a rejected answer per pair, each up to max_length
        p = cfg.preference
        steps, per_step = p.max_steps, p.batch_size * p.grad_accum * p.max_length * 2 * world
        ckpt, keep = _sft_checkpoint_bytes(cfg, p.train_method), cfg.sft.save_total_limit
    else:
        train = cfg.train
        steps, per_step = train.max_steps, train.batch_size * train.grad_accum * train.block_size * world
        ckpt, keep = checkpoint_bytes(cfg), train.save_total_limit
    est = {
        "tokens": steps * per_step,
        "tokens_per_step": per_step,
        "steps": steps,
        "command": cfg.launch.command,
        "processes": world,
        "instance": job.instance,
        "instances": job.instances,
        "tokens_per_s_per_gpu": job.tokens_per_s,
        "price_per_hour": job.price_per_hour,
        "spot_price_per_hour": job.spot_price_per_hour,
        "checkpoint_bytes": ckpt,
        "keep_checkpoints": keep,
        "planned_tokens": job.tokens,
        "storage_price_gb_month": job.storage_price_gb_month,
    }
    if job.tokens_per_s:
        est.update(
            mem.job_cost(
                tokens=est["tokens"],
                tokens_per_s=job.tokens_per_s * world,
                instances=job.instances,
                price_per_hour=job.price_per_hour,
                spot_price_per_hour=job.spot_price_per_hour,
                checkpoint_bytes=ckpt or 0,
                keep_checkpoints=keep,
                storage_price_gb_month=job.storage_price_gb_month,
            )
        )
    return est


def cost_lines(est: dict, *, spot: bool, max_run_hours: float) -> str:
    """The estimate as the lines printed before a launch."""
    e = est
    out = [
        "cost of the job (azllm.memory.job_cost; example prices from benchmark.job, nothing fetched):",
        f"  tokens       {e['tokens']:,} = {e['steps']} steps x {e['tokens_per_step']:,} tokens "
        f"({e['processes']} processes on {e['instances']} x {e['instance']})",
    ]
    if e.get("command") == "sft":
        out.append("  note         azllm sft: at most this many tokens (steps x batch x sft.max_length)")
    elif e.get("command") == "prefer":
        out.append(
            "  note         azllm prefer: at most this many tokens (steps x batch x preference.max_length x 2: "
            "chosen and rejected); the reference's forward passes come on top unless precomputed"
        )
    elif abs(e["tokens"] - e["planned_tokens"]) > 0.01 * e["planned_tokens"]:
        out.append(f"  note         benchmark.job.tokens plans {e['planned_tokens']:.3g}; the job trains on train's")
    if "hours" not in e:
        return "\n".join(
            out + ["  no estimate: set benchmark.job.tokens_per_s (tokens/s of one GPU, e.g. from make bench-gpu)"]
        )
    ck = (
        "unknown (pretrained base)"
        if e["checkpoint_bytes"] is None
        else f"{e['keep_checkpoints']} x {e['checkpoint_gb']:.1f} GB kept, ${e['storage']:.3f} for the job's duration "
        f"(${e['keep_checkpoints'] * e['checkpoint_gb'] * e['storage_price_gb_month']:.2f} per month they stay in S3)"
    )
    out += [
        f"  throughput   {e['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU (benchmark.job.tokens_per_s) x "
        f"{e['processes']}",
        f"  time         {e['hours']:.2f} h ({e['instance_hours']:.2f} instance-hours; max run {max_run_hours:g} h)",
        f"  on-demand    ${e['on_demand']:,.2f} at ${e['price_per_hour']}/h per instance",
        f"  spot         ${e['spot']:,.2f} at ${e['spot_price_per_hour']}/h per instance",
        f"  checkpoints  {ck}",
        f"  total        ${e['total_spot' if spot else 'total_on_demand']:,.2f} "
        f"({'spot' if spot else 'on-demand'}, this job) vs ${e['total_on_demand' if spot else 'total_spot']:,.2f} "
        f"({'on-demand' if spot else 'spot'})",
    ]
    if e["hours"] > max_run_hours:
        out.append(
            f"  WARNING      {e['hours']:.1f} h > launch.max_run_hours: SageMaker stops the job first; a "
            "new launch resumes from the checkpoints"
        )
    return "\n".join(out)


def _write_record(path: Path, record: dict, secrets: dict) -> None:
    """``record`` as JSON at ``path``, every string holding a secret value redacted."""
    atomic_write_text(path, json.dumps(_redact(record, set(secrets.values())), indent=2) + "\n")


def launch(
    params_file: str | os.PathLike,
    *,
    dry_run: bool = False,
    out_dir: str | os.PathLike | None = None,
    environ=None,
    show=print,
) -> dict:
    """Build the job of ``params_file``, ``show`` its cost (and with ``dry_run`` its description), write
    ``job.json`` to ``out_dir`` (default ``artifacts/<run_name>/launch``) and, unless ``dry_run``, start it (not
    waiting). Returns the record written."""
    cfg = load_params(params_file)
    _check(cfg, dry_run=dry_run)
    _sdk()  # before anything is written
    out = Path(out_dir) if out_dir else Paths.of(cfg).launch
    src = stage_source(params_file, out / "source", command=cfg.launch.command)
    trainer, secrets = build_trainer(cfg, src, environ=environ, offline=dry_run)
    record = {
        "params_file": str(params_file),
        "dry_run": dry_run,
        "source_dir": str(src),
        "trainer": describe(trainer, secrets),
        "cost": estimate(cfg),
        "forwarded_env": sorted(secrets),
    }
    show(cost_lines(record["cost"], spot=cfg.launch.spot, max_run_hours=cfg.launch.max_run_hours))
    if dry_run:
        show(json.dumps(record["trainer"], indent=2))
    _write_record(out / "job.json", record, secrets)  # what is asked for, before asking
    if not dry_run:
        trainer.train(wait=False, logs=False)
        job = getattr(trainer, "_latest_training_job", None)
        record["training_job_name"] = getattr(job, "training_job_name", None)
        _write_record(out / "job.json", record, secrets)
        show(f"started SageMaker training job {record['training_job_name']} in {cfg.launch.region}")
    show(f"job description: {out / 'job.json'}")
    return record
