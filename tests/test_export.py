"""Merge and export: LoRA and QLoRA adapters with trained token rows merged into one standalone folder that plain
transformers loads offline, with the adapter model's logits."""

import warnings

import pytest
import torch

from conftest import FIXTURES, TINY_MODEL

warnings.filterwarnings("ignore")
N_NEW = 10


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    from azllm.data import iter_documents, resolve_source
    from azllm.tokenizer_train import train_tokenizer

    docs = list(iter_documents(resolve_source({"path": "data/az/train/*.txt", "max_bytes_per_file": 8000}, FIXTURES)))
    return train_tokenizer(docs, tmp_path_factory.mktemp("tok") / "tok", vocab_size=600, model_type="unigram")


def _trained_adapter(tied: bool, quantized: bool):
    """A tiny model whose last N_NEW ids are new, LoRA (QLoRA) with those rows trainable, trained 3 steps."""
    from azllm.lora import apply_lora, make_optimizer, quantize_model
    from azllm.model import build_model, model_config

    V = 600
    m = build_model(model_config("tiny", V - N_NEW, **TINY_MODEL, tie_word_embeddings=tied), seed=0)
    m.resize_token_embeddings(V, mean_resizing=False)
    if quantized:
        m = quantize_model(m, bits=4, double_quant=True, quant_type="nf4", compute_dtype=torch.float32)
    p = apply_lora(m, r=4, alpha=8, dropout=0.0, kbit=quantized, new_token_ids=list(range(V - N_NEW, V)))
    opt = make_optimizer(p, "adamw", lr=1e-2, weight_decay=0.0, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        x = torch.randint(0, V, (4, 16), generator=g)
        p(input_ids=x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return p.eval()


@pytest.mark.parametrize("quantized", [False, True], ids=["lora", "qlora"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_merged_export_loads_with_plain_transformers_and_matches(tied, quantized, tok_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from azllm.export import export_model

    p = _trained_adapter(tied, quantized)
    out = export_model(p, tok_dir, tmp_path / "export")
    files = {f.name for f in out.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"} <= files
    assert not any(f.startswith("adapter") or f.endswith(".bin") for f in files)
    m = AutoModelForCausalLM.from_pretrained(str(out), local_files_only=True, trust_remote_code=False).eval()
    assert "quantization_config" not in m.config.to_dict() and m.dtype == torch.float32
    tok = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    assert len(tok) == m.config.vocab_size == 600
    x = torch.randint(0, 600, (2, 12), generator=torch.Generator().manual_seed(1))
    x[:, ::2] = torch.arange(600 - N_NEW, 600)[:6]  # the new tokens take part
    with torch.no_grad():
        want, got = p(input_ids=x).logits, m(input_ids=x).logits
    # stated tolerance: 1e-5 for LoRA in fp32; QLoRA merges the same dequantized weights (float rounding only)
    assert torch.allclose(got, want, atol=1e-5 if not quantized else 1e-4, rtol=0), (got - want).abs().max()
