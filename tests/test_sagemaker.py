"""The training entry under a simulated SageMaker job: SM_* variables pointing at temporary folders, the entry
script ``azllm.recipes.launch`` stages (``python -m azllm train`` in-process) started as the SDK's driver starts it,
in a fresh process, LoRA; checkpoints in the synced folder, the model where SageMaker collects it, and a restarted
job that finds the finished run."""

import json
import subprocess
import sys

import pytest
from train_helpers import simulated_sagemaker_job

from azllm.recipes import launch as L


@pytest.mark.slow  # the staged entry trains in a child process, then starts again (~30 s on 2 cores)
def test_the_staged_entry_trains_under_a_simulated_sagemaker_job_and_a_restart_finds_it(tmp_path):
    env = simulated_sagemaker_job(tmp_path, tmp_path / "p.yaml", max_steps=6, every=3)
    src = L.stage_source(tmp_path / "p.yaml", tmp_path / "code")
    # what the SDK's torchrun driver runs: the entry script with the hyperparameters as --key value
    cmd = [sys.executable, "azllm_train.py", "--params", "params.yaml", "--run_name", "sm", "--params_hash", "0123"]
    p = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    model = {f.name for f in (tmp_path / "model").iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "sp.model"} <= model
    assert "model.safetensors" not in model  # LoRA: the adapter only
    results = json.loads((tmp_path / "output" / "results.json").read_text())
    assert results["steps"] == 6 and results["method"] == "lora"
    assert [c.name for c in (tmp_path / "checkpoints").glob("checkpoint-*")] == ["checkpoint-6"]  # only the last
    assert (tmp_path / "checkpoints" / "checkpoint-6" / "azllm_complete.json").is_file()
    again = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=600)  # a restarted job
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((tmp_path / "output" / "results.json").read_text())["steps"] == 6
