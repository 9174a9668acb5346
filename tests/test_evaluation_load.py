"""Loading the model a score is for (azllm.evaluation.load): a folder, a checkpoint whose run recorded the
tokenizer, and a hub id while offline."""

import json
import shutil

import pytest
from eval_helpers import eval_tokenizer_dir, hf_tok, tiny_folder  # noqa: F401

from azllm.evaluation.harness import EvalModelError
from azllm.evaluation.load import load_model, run_tokenizer_path


def test_a_folder_with_its_tokenizer(tiny_folder):
    model, tok, info = load_model(tiny_folder)
    assert info["kind"] == "folder" and info["tokenizer"] == str(tiny_folder) and tok.eos_token == "</s>"
    assert not model.training


def test_a_checkpoint_finds_the_tokenizer_its_run_recorded(tiny_folder, eval_tokenizer_dir, tmp_path):
    run = tmp_path / "run"
    ck = run / "checkpoint-4"
    ck.mkdir(parents=True)
    for f in ("config.json", "model.safetensors", "generation_config.json"):
        if (tiny_folder / f).is_file():
            shutil.copy(tiny_folder / f, ck / f)
    with pytest.raises(EvalModelError, match="no tokenizer files here"):
        load_model(ck)
    (run / "azllm_run.json").write_text(json.dumps({"tokenizer_path": str(eval_tokenizer_dir)}))
    assert run_tokenizer_path(ck) == str(eval_tokenizer_dir)
    _, _, info = load_model(ck)
    assert info["tokenizer"] == str(eval_tokenizer_dir)


def test_a_hub_id_offline_says_what_to_do(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # read at import: set after it, the variable alone leaves the hub client retrying a network it cannot reach
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(EvalModelError, match="hub is not reachable.*HF_TOKEN"):
        load_model("meta-llama/Llama-3.2-1B")


def test_not_a_model_folder(tmp_path):
    with pytest.raises(EvalModelError, match="not a model folder"):
        load_model(tmp_path)
    with pytest.raises(EvalModelError, match="no such model folder"):
        load_model("./nowhere/model")
