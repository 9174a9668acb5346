"""The params section of a SageMaker training job (``python -m azllm launch``). See :mod:`azllm.recipes.launch`.

The instance, its prices and the planned tokens/s are ``benchmark.job`` (the job that is priced is the job that is
launched); the model, the steps and the batch are ``model`` and ``train``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .data import Section


class LaunchConfig(Section):
    """An Amazon SageMaker training job of this params file: ``python -m azllm train`` under torchrun on
    ``benchmark.job.instances`` x ``benchmark.job.instance``, managed spot, checkpoints synced to S3."""

    command: Literal["train", "sft", "prefer"] = "train"
    """What the job runs on the params file: ``azllm train`` (continued pretraining, ``train``), ``azllm sft``
    (instruction tuning, ``sft``; its steps, batch and ``max_length`` are what the cost counts) or ``azllm prefer``
    (preference tuning, ``prefer``: steps x batch x ``preference.max_length`` x 2, a chosen and a rejected answer
    per pair)."""
    region: str = "us-east-1"
    """AWS region of the job (the image must be in the same region)."""
    image: str = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313"
    """Training image: the AWS PyTorch training DLC (what the SDK's image table gives for PyTorch 2.10 GPU
    training in us-east-1); requirements.lock is installed over it at start (torch 2.13, transformers 5.x)."""
    role: str | None = None
    """IAM execution role ARN of the job (needed to launch)."""
    output_s3_uri: str | None = None
    """S3 prefix of the job's outputs: model.tar.gz, output.tar.gz, the uploaded code (needed to launch)."""
    base_job_name: str | None = None
    """Job name prefix (None: azllm-<run_name>)."""
    volume_gb: int = 100
    """Storage volume per instance (checkpoints, pip cache, input channels)."""
    spot: bool = True
    """Managed spot training: a restarted job resumes from the checkpoints synced to S3."""
    max_run_hours: float = 24.0
    """Longest training time; the job is stopped after it."""
    max_wait_hours: float = 48.0
    """Spot only: training plus waiting for spot capacity (at least max_run_hours)."""
    checkpoint_s3_uri: str | None = None
    """S3 prefix the checkpoint folder is synced to (None: the SDK's per-job default); a fixed prefix lets a new
    job resume where the last one stopped."""
    checkpoint_local_path: str = "/opt/ml/checkpoints"
    """Checkpoint folder in the container that SageMaker syncs (passed to the entry as AZLLM_CHECKPOINT_DIR)."""
    data_s3_uri: str | None = None
    """S3 prefix laid out like a data root (data/az/train/...): input channel ``data`` (SM_CHANNEL_DATA)."""
    tokens_s3_uri: str | None = None
    """S3 prefix of pre-encoded token files (train.bin, val.bin): input channel ``tokens`` (SM_CHANNEL_TOKENS)."""
    environment: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the job, e.g. {NCCL_DEBUG: WARN}; never secrets (refused)."""
    forward_env: list[str] = Field(default_factory=lambda: ["HF_TOKEN"])
    """Names of variables copied from the launcher's environment into the job's (secrets: never recorded)."""
