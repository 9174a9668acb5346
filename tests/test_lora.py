"""LoRA / QLoRA with peft + bitsandbytes on CPU: quantization, the AVX512-BF16 repack trap and its guard, LoRA
options, optimizers, the k-bit preparation (dtypes, checkpointing, the loss guard of its default)."""

from __future__ import annotations

import warnings

import pytest
import torch

from conftest import TINY_MODEL

warnings.filterwarnings("ignore")
V = 256


Q = {"double_quant": True, "quant_type": "nf4", "compute_dtype": torch.bfloat16}  # the QLoRA recipe


def _cfg():
    from azllm.model import model_config

    return model_config("tiny", V, **TINY_MODEL)


@pytest.fixture(scope="module")
def base():
    from azllm.model import build_model

    return build_model(_cfg(), seed=0)


def _has_avx512_bf16() -> bool:
    from bitsandbytes.functional import has_avx512bf16

    return bool(has_avx512bf16())


def _qlora(base, guard=True):
    import bitsandbytes as bnb

    from azllm.lora import apply_lora, quantize_model

    q = quantize_model(base, bits=4, **Q)
    torch.manual_seed(0)
    p = apply_lora(q, r=4, alpha=8, dropout=0.0)
    if not guard:  # undo the guard: bitsandbytes' default behaviour
        for m in p.modules():
            if isinstance(m, bnb.nn.Linear4bit):
                m.support_avx512bf16_for_cpu = _has_avx512_bf16()
    with torch.no_grad():  # non-zero B so that every LoRA matrix gets a gradient
        for n, w in p.named_parameters():
            if "lora_B" in n:
                w.normal_(0, 0.05, generator=torch.Generator().manual_seed(hash(n) % 2**31))
    return p


def _grads(model, x):
    model.train()
    model.zero_grad(set_to_none=True)
    model(input_ids=x, labels=x).loss.backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


X = torch.randint(0, V, (2, 16), generator=torch.Generator().manual_seed(0))


def test_quantize_4bit_nf4_double_quant(base):
    import bitsandbytes as bnb

    from azllm.lora import quantize_model

    q = quantize_model(base, bits=4, **Q)
    lin = q.model.layers[0].self_attn.q_proj
    assert isinstance(lin, bnb.nn.Linear4bit) and lin.weight.quant_state.quant_type == "nf4"
    assert lin.weight.quant_state.nested  # double quantization
    assert lin.compute_dtype == torch.bfloat16 and not lin.support_avx512bf16_for_cpu  # guard on
    assert q.is_loaded_in_4bit and not isinstance(q.lm_head, bnb.nn.Linear4bit)
    with torch.no_grad():
        a, b = base(input_ids=X).logits, q(input_ids=X).logits
    assert torch.isfinite(b).all() and (a - b).abs().mean() < 0.1 * a.abs().mean() + 0.05
    q8 = quantize_model(base, bits=8, **Q)
    assert isinstance(q8.model.layers[0].mlp.up_proj, bnb.nn.Linear8bitLt)
    with pytest.raises(ValueError, match="bits"):
        quantize_model(base, bits=3, **Q)


def test_lora_grads_after_eval_pass_equal_fresh_model(base):
    """The guard: a no-grad eval forward (as during evaluation or generate) must not change LoRA gradients."""
    fresh = _grads(_qlora(base), X)
    m = _qlora(base)
    m.eval()
    with torch.no_grad():
        m(input_ids=X)
        m.generate(input_ids=X[:1, :4], max_new_tokens=2, do_sample=False)
    after = _grads(m, X)
    assert fresh.keys() == after.keys() and len(fresh) == 2 * 2 * 7  # A and B of 7 linears in 2 layers
    for n in fresh:
        assert torch.equal(fresh[n], after[n]), n
        assert fresh[n].abs().sum() > 0, n
    from azllm.lora import check_not_repacked

    check_not_repacked(m)


def test_repack_trap_is_real_without_the_guard(base):
    """Shows what the guard prevents (and that the test above can fail): bitsandbytes' default repacks."""
    if not _has_avx512_bf16():
        pytest.skip("this CPU has no AVX512-BF16: bitsandbytes never repacks here")
    from azllm.lora import QuantError, check_not_repacked

    fresh = _grads(_qlora(base, guard=False), X)
    m = _qlora(base, guard=False)
    m.eval()
    with torch.no_grad():
        m(input_ids=X)
    with pytest.raises(QuantError, match="repacked"):
        check_not_repacked(m)
    after = _grads(m, X)
    assert any(not torch.equal(fresh[n], after[n]) for n in fresh)


def test_lora_options_and_targets(base):
    import copy

    from azllm.lora import apply_lora

    p = apply_lora(copy.deepcopy(base), r=8, alpha=16, dropout=0.1, use_rslora=True)
    cfg = p.peft_config["default"]
    assert cfg.r == 8 and cfg.lora_alpha == 16 and cfg.use_rslora and cfg.lora_dropout == 0.1
    names = {n.split(".lora_")[0].split(".")[-1] for n, _ in p.named_parameters() if "lora_" in n}
    assert names == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}  # no lm_head
    lin = p.base_model.model.model.layers[0].self_attn.q_proj
    assert lin.scaling["default"] == pytest.approx(16 / 8**0.5)  # rsLoRA
    trainable = [n for n, w in p.named_parameters() if w.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    p2 = apply_lora(copy.deepcopy(base), r=8, alpha=16, dropout=0.0, target_modules=["q_proj", "v_proj"])
    assert {n.split(".lora_")[0].split(".")[-1] for n, _ in p2.named_parameters() if "lora_" in n} == {
        "q_proj",
        "v_proj",
    }


def test_lm_head_target_dropped_when_fused_loss_is_on(base):
    """FLCE reads lm_head.weight directly, so a LoRA adapter there would be ignored: apply_lora drops it loudly."""
    import copy

    from azllm.lora import apply_lora

    m = copy.deepcopy(base)
    with pytest.warns(UserWarning, match="lm_head.*DROPPED"):
        p = apply_lora(m, r=8, alpha=16, dropout=0.0, target_modules=["q_proj", "lm_head"], liger_flce=True)
    assert not any("lm_head" in n and "lora_" in n for n, _ in p.named_parameters())
    p2 = apply_lora(copy.deepcopy(base), r=8, alpha=16, dropout=0.0, target_modules=["q_proj", "lm_head"])
    assert any("lm_head" in n and "lora_" in n for n, _ in p2.named_parameters())


@pytest.mark.parametrize("name,quantized", [("adamw", False), ("adamw_8bit", False), ("paged_adamw_8bit", True)])
def test_optimizers_train_lora_and_qlora(base, name, quantized):
    import copy

    import bitsandbytes as bnb

    from azllm.lora import apply_lora, make_optimizer

    m = _qlora(base) if quantized else apply_lora(copy.deepcopy(base), r=4, alpha=8, dropout=0.0)
    opt = make_optimizer(m, name, lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95))
    assert isinstance(
        opt,
        {"adamw": torch.optim.AdamW, "adamw_8bit": bnb.optim.AdamW8bit, "paged_adamw_8bit": bnb.optim.PagedAdamW8bit}[
            name
        ],
    )
    decay = {id(p) for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    assert all(p.dim() >= 2 for p in m.parameters() if id(p) in decay)
    before = {n: p.detach().clone() for n, p in m.named_parameters() if p.requires_grad}
    losses = []
    for _ in range(8):
        m.train()
        loss = m(input_ids=X, labels=X).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert any(not torch.equal(before[n], p) for n, p in m.named_parameters() if p.requires_grad)
    with pytest.raises(ValueError, match="unknown optimizer"):
        make_optimizer(m, "sgd", lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95))


# ------------------------------------------------------------------------------ new token rows under LoRA


def _train_steps(p, n_new: int, steps: int = 3):
    from azllm.lora import make_optimizer

    opt = make_optimizer(p, "adamw", lr=1e-2, weight_decay=0.0, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        x = torch.randint(0, V + n_new, (4, 16), generator=g)
        x[:, ::3] = torch.randint(V, V + n_new, (4, 6), generator=g)  # the new tokens occur in every batch
        p(input_ids=x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def _grown(tied: bool, n_new: int):
    """A tiny model whose vocabulary grew by ``n_new`` ids (as after a tokenizer swap or an extension)."""
    from azllm.model import build_model, model_config

    m = build_model(model_config("tiny", V, **TINY_MODEL, tie_word_embeddings=tied), seed=0)
    m.resize_token_embeddings(V + n_new, mean_resizing=False)
    return m


@pytest.mark.parametrize("new_rows", ["tokens", "full"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_new_token_rows_train_under_lora_and_survive_save_load(tied, new_rows, tmp_path):
    """The defect of a vocabulary change under LoRA: all-linear leaves embed_tokens / lm_head frozen, so new rows
    never trained. With new_token_ids they train; the base rows do not move (tokens) and both reload."""
    import copy

    from peft import PeftModel

    from azllm.lora import apply_lora, embedding_rows

    n_new = 10
    m = _grown(tied, n_new)
    start = copy.deepcopy(m.state_dict())
    in0, out0 = embedding_rows(m)
    p = apply_lora(m, r=4, alpha=8, dropout=0.0, new_token_ids=list(range(V, V + n_new)), new_rows=new_rows)
    _train_steps(p, n_new)
    in1, out1 = embedding_rows(p)
    for before, after in ((in0, in1), (out0, out1)):
        assert (after[V:] - before[V:]).abs().amax(dim=1).min() > 1e-4  # every new row trained
        if new_rows == "tokens":
            assert torch.equal(after[:V], before[:V])  # the base rows did not move
    assert tied == (in1.data_ptr() == out1.data_ptr() or torch.equal(in1, out1))
    p.save_pretrained(tmp_path / "adapter")
    fresh = _grown(tied, n_new)
    fresh.load_state_dict(start)
    q = PeftModel.from_pretrained(fresh, tmp_path / "adapter")
    in2, out2 = embedding_rows(q)
    assert torch.equal(in2, in1) and torch.equal(out2, out1)
    x = torch.randint(0, V + n_new, (2, 8))
    assert torch.allclose(p.eval()(input_ids=x).logits, q.eval()(input_ids=x).logits, atol=1e-6)


def test_without_new_token_ids_the_rows_stay_frozen_and_frozen_warns_loudly():
    from azllm.lora import apply_lora, embedding_rows

    m = _grown(True, 10)
    in0, _ = embedding_rows(m)
    p = apply_lora(m, r=4, alpha=8, dropout=0.0)  # what a run did before the fix
    _train_steps(p, 10)
    assert torch.equal(embedding_rows(p)[0], in0)
    with pytest.warns(UserWarning, match="NEW TOKEN ROWS STAY FROZEN"):
        apply_lora(_grown(True, 10), r=4, alpha=8, dropout=0.0, new_token_ids=[V], new_rows="frozen")
    with pytest.raises(ValueError, match="fused linear cross-entropy"):
        apply_lora(_grown(True, 10), r=4, alpha=8, dropout=0.0, new_token_ids=[V], liger_flce=True)


def _kbit(fp32_rest: bool, ckpt: bool = False):
    """A bf16 tiny Llama quantized to NF4 (compute bf16), prepared by :func:`azllm.lora.prepare_kbit`, with a LoRA
    adapter of the same seed."""
    from azllm.lora import apply_lora, quantize_model
    from azllm.model import build_model

    model = build_model(_cfg(), seed=0).to(torch.bfloat16)
    q = quantize_model(model, bits=4, **Q)
    torch.manual_seed(0)
    return apply_lora(q, r=4, alpha=8, dropout=0.0, kbit_fp32_rest=fp32_rest, gradient_checkpointing=ckpt)


def _az_bytes(n: int, seq: int = 32) -> torch.Tensor:
    """``n`` rows of ``seq`` UTF-8 bytes of the Azerbaijani fixture text (tests/fixtures, cut from ../shared): real
    Azerbaijani as byte tokens, which the tiny model's 256-row vocabulary holds."""
    from conftest import FIXTURES

    text = sorted((FIXTURES / "data/az/train").glob("*.txt"))[0].read_bytes()[: n * seq]
    return torch.tensor(list(text), dtype=torch.long).view(n, seq)


def test_a_kbit_base_keeps_its_dtype_and_only_fp32_rest_makes_the_activations_fp32():
    """The mechanism the memory model counts (:func:`azllm.memory.act_bytes`): prepared without ``fp32_rest`` the
    norms stay bf16 and every decoder layer hands on bf16; with it (peft's prepare_model_for_kbit_training) the norm
    weights are fp32, and so is the residual stream."""
    from azllm import memory as mem

    seen = {}
    for fp32_rest in (False, True):
        p = _kbit(fp32_rest)
        layer = p.base_model.model.model.layers[0]
        out: list = []
        hook = layer.register_forward_hook(lambda m, i, o, out=out: out.append(o[0] if isinstance(o, tuple) else o))
        p.train()
        p(input_ids=X, labels=X).loss.backward()
        hook.remove()
        seen[fp32_rest] = (layer.input_layernorm.weight.dtype, out[0].dtype)
        assert all(n.startswith("base_model") for n, w in p.named_parameters() if w.requires_grad)
        assert all(w.grad is not None for n, w in p.named_parameters() if "lora_" in n and w.requires_grad)
    assert seen == {False: (torch.bfloat16, torch.bfloat16), True: (torch.float32, torch.float32)}
    assert mem.act_bytes(mem.parse_variant("qlora", dtype="bf16")) == 2
    assert mem.act_bytes(mem.parse_variant("qlora+kbit32", dtype="bf16")) == 4


def test_checkpointing_a_kbit_base_still_trains_the_adapters():
    """Non-reentrant checkpointing on a frozen k-bit base: every LoRA matrix gets a gradient, and the gradients
    equal those without checkpointing."""
    x = _az_bytes(2, 16)
    grads = [_grads(_kbit(False, ckpt), x) for ckpt in (False, True)]
    assert grads[0] and set(grads[0]) == set(grads[1])
    for n, g in grads[0].items():
        assert torch.allclose(g.float(), grads[1][n].float(), atol=1e-2, rtol=1e-2), n


def test_the_default_kbit_preparation_keeps_the_loss_on_real_azerbaijani_text():
    """The loss guard of the changed default: after the same steps on the same real Azerbaijani bytes, QLoRA
    prepared in bf16 ends within 0.02 nats of QLoRA prepared as peft does (fp32 rest)."""
    from azllm.lora import make_optimizer

    x = _az_bytes(16)
    first, last = {}, {}
    for fp32_rest in (False, True):
        p = _kbit(fp32_rest)
        with torch.no_grad():
            first[fp32_rest] = p(input_ids=x, labels=x).loss.item()
        opt = make_optimizer(p, "adamw", lr=2e-3, weight_decay=0.0, betas=(0.9, 0.95))
        p.train()
        for step in range(8):
            batch = x[2 * step : 2 * step + 2]
            loss = p(input_ids=batch, labels=batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            last[fp32_rest] = p(input_ids=x, labels=x).loss.item()
    assert first[False] - last[False] > 0.05, (first, last)  # it trained: the guard compares moved losses
    assert abs(last[False] - last[True]) <= 0.02, last
