"""The training entry under Amazon SageMaker: what the job's environment means for a run.

SageMaker starts ``python -m azllm train params.yaml`` (through torchrun for several GPUs or nodes) with its
``SM_*`` variables. :func:`job_paths` reads them, :func:`azllm.recipes.train.job_config` lays them over the run's
config and
:func:`publish` puts the results where SageMaker collects them:

- ``SM_CHANNEL_DATA``: the ``data`` input channel, a folder laid out like a data root (``data/az/train/...``);
  it becomes ``data.root``. ``SM_CHANNEL_TOKENS``: pre-encoded token files (``train.bin``/``val.bin``); they
  become ``tokens.dir``.
- checkpoints go to the local folder SageMaker syncs to S3 (``CheckpointConfig.local_path``, by default
  ``/opt/ml/checkpoints``; ``$AZLLM_CHECKPOINT_DIR`` overrides it), keeping ``train.save_total_limit`` of them; a
  restarted spot job finds them there and resumes (and SIGTERM, the spot notice, writes one at once).
- ``SM_MODEL_DIR``: the final model: the adapter for LoRA/QLoRA, the full weights otherwise, and the tokenizer.
- ``SM_OUTPUT_DATA_DIR``: ``results.json``.
- ``SM_NUM_GPUS`` and ``SM_HOSTS`` are recorded in the results; ranks come from torchrun's environment.

Nothing here talks to AWS: it only reads the environment and writes files.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from .export import copy_tokenizer_files

__all__ = ["job_paths", "publish", "DEFAULT_CHECKPOINTS"]

DEFAULT_CHECKPOINTS = "/opt/ml/checkpoints"


def job_paths(env: dict | None = None) -> dict | None:
    """The SageMaker folders of this process, or None outside a SageMaker job (no ``SM_MODEL_DIR``)."""
    env = os.environ if env is None else env
    if not env.get("SM_MODEL_DIR"):
        return None
    return {
        "model_dir": env["SM_MODEL_DIR"],
        "output_dir": env.get("SM_OUTPUT_DATA_DIR"),
        "checkpoints": env.get("AZLLM_CHECKPOINT_DIR", DEFAULT_CHECKPOINTS),
        "data": env.get("SM_CHANNEL_DATA"),
        "tokens": env.get("SM_CHANNEL_TOKENS"),
        "num_gpus": int(env.get("SM_NUM_GPUS", "0") or 0),
        "hosts": json.loads(env.get("SM_HOSTS", "[]")),
    }


def publish(result: dict, tokenizer_dir: str | None, sm: dict) -> Path:
    """Copy the final model (and the tokenizer) to ``SM_MODEL_DIR`` and ``results.json`` to
    ``SM_OUTPUT_DATA_DIR``; returns the model folder. Only the process of rank 0 should call it."""
    model_dir = Path(sm["model_dir"])
    model_dir.mkdir(parents=True, exist_ok=True)
    for f in Path(result["final_dir"]).iterdir():
        if f.is_file():
            shutil.copy(f, model_dir / f.name)
    copy_tokenizer_files(tokenizer_dir, model_dir)
    if sm.get("output_dir"):
        out = Path(sm["output_dir"])
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(result["output_dir"]) / "results.json", out / "results.json")
    return model_dir
