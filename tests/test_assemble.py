"""The one model assembly (azllm.assemble): the model a benchmark variant measures is the model a training run of
the same settings trains (same modules, same trainable parameters, same first-step loss), how a base meets the
run's tokenizer, and the documented order of the steps."""

import pytest
import torch
from config_helpers import default_spec

from azllm import memory as mem
from azllm.assemble import METHODS, assemble_model, vocab_fit
from azllm.bench.training import variant_spec
from azllm.config import load_params
from azllm.recipes.train import model_spec
from conftest import TINY_MODEL

V = 320


def _params(variant: mem.Variant):
    """Params whose training run has the settings of ``variant`` (what a user would write)."""
    method = "qlora" if v_quant(variant) else ("lora" if variant.lora else "full")
    return load_params(
        None,
        overrides={
            "seed": 7,
            "model": {
                "preset": "tiny",
                "config": TINY_MODEL,
                "dtype": variant.dtype,
                "lora": {"r": variant.lora_r, "alpha": 16, "dropout": variant.lora_dropout},
                "quant": {"bits": 4, "double_quant": variant.double_quant, "compute_dtype": variant.dtype},
            },
            "train": {"method": method, "gradient_checkpointing": variant.grad_ckpt},
        },
    )


def v_quant(variant) -> bool:
    return bool(variant.quant)


def _job(variant: mem.Variant) -> dict:
    """The benchmark job of the same settings, as the recipe builds it from the params."""
    from azllm.recipes.benchmark import benchmark_job

    cfg = load_params(
        None,
        overrides={
            "seed": 7,
            "benchmark": {
                "preset": "tiny",
                "model": TINY_MODEL,
                "lora": {"r": variant.lora_r, "alpha": 16, "dropout": variant.lora_dropout},
                "lr": 1e-3,
            },
        },
    )
    return benchmark_job(cfg, "/ids.npy", V)


def _first_loss(model) -> float:
    x = torch.randint(0, V, (2, 16), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)  # LoRA dropout draws from the global generator
    return model.train()(input_ids=x, labels=x).loss.item()


def _trainable(model) -> dict:
    return {n: tuple(p.shape) for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("name", ["baseline", "ckpt", "lora", "lora+ckpt", "qlora"])
def test_benchmark_variant_is_the_training_model(name):
    variant = mem.parse_variant(name, dtype="fp32", lora_r=8, lora_dropout=0.05)
    bench = variant_spec(variant, _job(variant))
    train = model_spec(_params(variant))
    fields = (
        "method",
        "preset",
        "config",
        "dtype",
        "seed",
        "liger",
        "quant_bits",
        "quant_type",
        "double_quant",
        "compute_dtype",
        "lora_r",
        "lora_alpha",
        "lora_dropout",
        "use_rslora",
        "target_modules",
        "gradient_checkpointing",
    )
    assert {f: getattr(bench, f) for f in fields} == {f: getattr(train, f) for f in fields}
    mb, _ = assemble_model(bench, vocab_size=V)
    mt, _ = assemble_model(train, vocab_size=V)
    assert [(n, type(m).__name__) for n, m in mb.named_modules()] == [
        (n, type(m).__name__) for n, m in mt.named_modules()
    ]
    assert _trainable(mb) == _trainable(mt) and _trainable(mb)
    assert _first_loss(mb) == _first_loss(mt)
    if variant.grad_ckpt:
        assert mb.is_gradient_checkpointing and mt.is_gradient_checkpointing


def test_the_order_is_quantize_then_lora_with_the_seed():
    """QLoRA: 4-bit linear layers under the adapters; two assemblies of one spec are the same model."""
    import bitsandbytes as bnb

    spec = default_spec(
        "model", method="qlora", config=dict(TINY_MODEL), seed=3, lora_r=4, lora_alpha=8, compute_dtype="fp32"
    )
    a, info = assemble_model(spec, vocab_size=V)
    b, _ = assemble_model(spec, vocab_size=V)
    assert any(isinstance(m, bnb.nn.Linear4bit) for m in a.modules())
    assert info["method"] == "qlora" and info["liger"]["applied"] == []
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_a_base_needs_the_tokenizer_and_an_unknown_method_is_refused():
    with pytest.raises(ValueError, match="method must be one of"):
        assemble_model(default_spec("model", method="dora"), vocab_size=V)
    with pytest.raises(ValueError, match="needs the run's tokenizer"):
        assemble_model(default_spec("model", base="/nowhere"), vocab_size=V)
    assert METHODS == ("full", "lora", "qlora")


def test_vocab_fit(tmp_path):
    from types import SimpleNamespace as NS

    (tmp_path / "azllm_vocab.json").write_text("{}")
    assert vocab_fit(NS(fingerprint="a", path=str(tmp_path)), {"tokenizer": "a"}) == "same"
    assert vocab_fit(NS(fingerprint="a", path=str(tmp_path)), {"tokenizer": "b"}) == "extend"
    assert vocab_fit(NS(fingerprint="a", path=None), {}) == "swap"


def test_a_missing_base_is_a_clear_error(tmp_path):
    from azllm.assemble import load_base

    with pytest.raises(ValueError, match="could not load base model .*no remote code"):
        load_base(tmp_path / "missing", torch.float32)
