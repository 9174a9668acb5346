"""The training entry under a simulated SageMaker job: SM_* variables pointing at temporary folders, the real
`python -m azllm train` in a fresh process, LoRA; checkpoints in the synced folder, the model where SageMaker
collects it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import FIXTURES, TINY_MODEL

REPO = Path(__file__).resolve().parent.parent


def test_entry_under_a_simulated_sagemaker_job(tmp_path):
    params = {"run_name": "sm", "data": {"train": {"path": "data/az/train/*.txt", "max_bytes_per_file": 20000},
                                         "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt",
                                                             "max_lines": 50}}},
              "tokenizer": {"vocab_size": 512, "model_type": "unigram"}, "model": {"config": TINY_MODEL},
              "train": {"method": "lora", "batch_size": 4, "block_size": 32, "max_steps": 6, "eval_steps": 3,
                        "save_steps": 3, "save_total_limit": 1, "logging_steps": 3, "eval_max_tokens": 512,
                        "untimed_steps": 1, "report_to": []}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    sm = {"SM_MODEL_DIR": tmp_path / "model", "SM_OUTPUT_DATA_DIR": tmp_path / "output", "SM_CHANNEL_DATA": FIXTURES,
          "AZLLM_CHECKPOINT_DIR": tmp_path / "checkpoints", "SM_NUM_GPUS": 0, "SM_HOSTS": '["algo-1"]',
          "AZLLM_ARTIFACTS": tmp_path / "artifacts"}
    env = {**{k: v for k, v in os.environ.items() if k != "AZLLM_DATA_ROOT"}, **{k: str(v) for k, v in sm.items()}}
    p = subprocess.run([sys.executable, "-m", "azllm", "train", str(tmp_path / "params.yaml")], env=env,
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    model = {f.name for f in (tmp_path / "model").iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "sp.model"} <= model
    assert "model.safetensors" not in model  # LoRA: the adapter only
    results = json.loads((tmp_path / "output" / "results.json").read_text())
    assert results["steps"] == 6 and results["method"] == "lora"
    assert [c.name for c in (tmp_path / "checkpoints").glob("checkpoint-*")] == ["checkpoint-6"]  # only the last
    assert (tmp_path / "checkpoints" / "checkpoint-6" / "azllm_complete.json").is_file()
    again = subprocess.run([sys.executable, "-m", "azllm", "train", str(tmp_path / "params.yaml")], env=env,
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)  # a restarted job
    assert again.returncode == 0 and json.loads((tmp_path / "output" / "results.json").read_text())["steps"] == 6
