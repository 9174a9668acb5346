"""The training entry under a simulated SageMaker job: SM_* variables pointing at temporary folders, the real
`python -m azllm train` in a fresh process, LoRA; checkpoints in the synced folder, the model where SageMaker
collects it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from train_helpers import simulated_sagemaker_job

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # the staged entry trains in a child process (~20 s on 2 cores)
def test_entry_under_a_simulated_sagemaker_job(tmp_path):
    env = simulated_sagemaker_job(tmp_path, tmp_path / "params.yaml", max_steps=6, every=3)
    p = subprocess.run(
        [sys.executable, "-m", "azllm", "train", str(tmp_path / "params.yaml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    model = {f.name for f in (tmp_path / "model").iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "sp.model"} <= model
    assert "model.safetensors" not in model  # LoRA: the adapter only
    results = json.loads((tmp_path / "output" / "results.json").read_text())
    assert results["steps"] == 6 and results["method"] == "lora"
    assert [c.name for c in (tmp_path / "checkpoints").glob("checkpoint-*")] == ["checkpoint-6"]  # only the last
    assert (tmp_path / "checkpoints" / "checkpoint-6" / "azllm_complete.json").is_file()
    again = subprocess.run(
        [sys.executable, "-m", "azllm", "train", str(tmp_path / "params.yaml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )  # a restarted job
    assert again.returncode == 0 and json.loads((tmp_path / "output" / "results.json").read_text())["steps"] == 6
