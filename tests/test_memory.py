"""The memory model against sizes computed by hand, and against real models built by azllm.model / azllm.lora."""

import math

import pytest

from azllm import memory as mem

# a small shape whose sizes are easy to write out by hand
CFG = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=1000,
    tie_word_embeddings=True,
)
# per layer: q 64*64, k 64*32, v 64*32, o 64*64, gate/up/down 3*64*128
LAYER_LIN = 64 * 64 + 64 * 32 + 64 * 32 + 64 * 64 + 3 * 64 * 128  # 36864
N_PARAMS = 1000 * 64 + 2 * LAYER_LIN + 5 * 64  # embed (tied) + linears + 2 norms/layer + final norm = 138048


def test_parameter_count_by_hand():
    pc = mem.parameter_count(CFG)
    assert pc["linear"] == 2 * LAYER_LIN == 73728
    assert pc["embed"] == 64000 and pc["lm_head"] == 0 and pc["norm"] == 320
    assert pc["total"] == N_PARAMS == 138048
    untied = mem.parameter_count({**CFG, "tie_word_embeddings": False})
    assert untied["total"] == N_PARAMS + 64000


def test_llama_3_2_1b_parameter_count():
    # meta-llama/Llama-3.2-1B has 1,235,814,400 parameters (tied embeddings, vocab 128256)
    cfg = dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        vocab_size=128256,
        tie_word_embeddings=True,
    )
    assert mem.parameter_count(cfg)["total"] == 1_235_814_400


def test_full_training_weights_grads_adamw():
    m = mem.predict_memory(CFG, "baseline", batch=2, seq=32, device="cpu")
    assert m["weights"] == 4 * N_PARAMS
    assert m["grads"] == 4 * N_PARAMS
    assert m["optimizer"] == 8 * N_PARAMS
    b = mem.predict_memory(CFG, "bf16", batch=2, seq=32, device="cpu")
    assert (b["weights"], b["grads"], b["optimizer"]) == (2 * N_PARAMS, 2 * N_PARAMS, 4 * N_PARAMS)


def test_adamw_8bit_states():
    m = mem.predict_memory(CFG, "adamw8", batch=1, seq=8, device="cpu")
    # >= 4096 elements: 2 uint8 states + 2 fp32 absmax per 256-element block; smaller: two fp32 states
    big = [64 * 64, 64 * 32, 64 * 32, 64 * 64, 64 * 128, 64 * 128, 128 * 64] * 2 + [64000]
    small = [64] * 5
    want = (
        sum(2 * n + 8 * math.ceil(n / 256) for n in big if n >= 4096)
        + sum(8 * n for n in big if n < 4096)
        + sum(8 * n for n in small)
    )
    assert m["optimizer"] == want
    assert m["optimizer"] < mem.predict_memory(CFG, "baseline", 1, 8)["optimizer"] / 3


def test_lora_and_qlora_weights():
    r = 16
    lora_params = (
        2 * r * sum(a + b for a, b in [(64, 64), (64, 32), (64, 32), (64, 64), (64, 128), (64, 128), (128, 64)])
    )
    m = mem.predict_memory(CFG, "lora", batch=1, seq=8)
    assert m["trainable"] == lora_params
    assert m["weights"] == 4 * N_PARAMS + 4 * lora_params  # fp32 base + fp32 adapters
    assert m["grads"] == 4 * lora_params and m["optimizer"] == 8 * lora_params
    q = mem.predict_memory(CFG, "qlora", batch=1, seq=8)
    # NF4: half a byte per linear weight + 1 uint8 absmax per 64 weights + 1 fp32 per 256 blocks (double quant)
    lin = 2 * LAYER_LIN
    nf4 = lin * 0.5 + lin / 64 + lin / 64 / 256 * 4
    assert q["weights"] == int(nf4 + 4 * (64000 + 320) + 4 * lora_params)
    q8 = mem.predict_memory(CFG, "qlora8", batch=1, seq=8)
    assert q8["weights"] == lin + 4 * 2 * (64 + 32 + 32 + 64 + 128 + 128 + 64) + 4 * (64000 + 320) + 4 * lora_params


def test_activation_count_by_hand():
    T = 2 * 32
    h, i, q, kv, nh = 64, 128, 64, 32, 4
    # fp32: per norm 4h (fp32 input) + h*4 (normalized) + h*4 (output); q/k/v + attention out + lse; 4 MLP tensors
    per_token = 2 * (4 * h + 4 * h + 4 * h) + 4 * (q + 2 * kv) + 4 * q + 4 * nh + 4 * 4 * i
    assert mem.layer_activation_bytes(CFG, "baseline", T) == T * per_token
    m = mem.predict_memory(CFG, "baseline", batch=2, seq=32, device="cpu")
    assert m["activations"] == 2 * T * per_token + T * (4 * h + 8 * h)  # + final norm
    c = mem.predict_memory(CFG, "ckpt", batch=2, seq=32, device="cpu")
    # checkpointing keeps each layer's input, and recomputes one layer at a time in backward
    assert c["activations"] == max(2 * T * 4 * h + T * 12 * h, 2 * T * 4 * h + T * per_token)
    assert c["activations"] < m["activations"]


def test_logits_and_fused_linear_cross_entropy():
    B, S, V, h = 4, 128, 1000, 64
    T = B * S
    m = mem.predict_memory(CFG, "baseline", B, S)
    assert m["logits"] == 12 * T * V  # fp32 log-softmax saved + its incoming grad + the logits' grad
    assert mem.predict_memory(CFG, "bf16", B, S)["logits"] == 12 * T * V  # upcast to fp32 before the loss
    f = mem.predict_memory(CFG, "liger_flce", B, S)
    chunk = 2 ** math.ceil(math.log2(math.ceil(T / math.ceil(V / h))))  # Liger's chunking: 32 rows here
    assert chunk == 32
    assert f["logits"] == chunk * V * 8 + T * h * 4 + V * h * 4
    assert f["logits"] < m["logits"] / 5


def test_peak_combines_components():
    m = mem.predict_memory(CFG, "baseline", 2, 32, device="cpu")
    assert m["total"] == m["weights"] + m["optimizer"] + max(
        m["activations"] + m["logits"], m["grads"] + m["step_temp"]
    )


def test_fit_planner_boundaries_and_order():
    cfg = dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        vocab_size=32000,
        tie_word_embeddings=True,
    )
    rows = mem.fit_plan(
        cfg,
        [mem.parse_variant(n, dtype="bf16") for n in ("baseline", "ckpt", "qlora+ckpt")],
        [24, 80],
        [2048],
        reserve_gb=1.0,
    )
    got = {(r["variant"], r["budget_gb"]): r["batch_at_2048"] for r in rows}
    for (name, gb), b in got.items():
        v = mem.parse_variant(name, dtype="bf16")
        assert mem.predict_memory(cfg, v, b, 2048)["total"] <= (gb - 1) * 1e9 if b else True
        assert mem.predict_memory(cfg, v, b + 1, 2048)["total"] > (gb - 1) * 1e9
    assert got[("baseline", 24)] < got[("ckpt", 24)] <= got[("qlora+ckpt", 24)]
    assert got[("baseline", 24)] <= got[("baseline", 80)]
    assert mem.max_batch(cfg, "baseline", 2048, 1e9) == 0  # 1 GB cannot hold a 1B model's AdamW states


def test_cost_per_billion_tokens():
    assert mem.cost_per_billion_tokens(10_000, 3.6) == pytest.approx(100.0)  # 1e9/1e4 s = 27.78 h x $3.6
    assert math.isnan(mem.cost_per_billion_tokens(0, 3.6))


def test_parse_variant_errors_and_combinations():
    v = mem.parse_variant("lora+ckpt+bf16+adamw8")
    assert (v.lora, v.grad_ckpt, v.dtype, v.optimizer, v.quant) == (True, True, "bf16", "adamw_8bit", 0)
    assert mem.parse_variant("liger").liger == ("rope", "rms_norm", "swiglu", "fused_linear_cross_entropy")
    with pytest.raises(ValueError, match="unknown variant token 'lorra'"):
        mem.parse_variant("lorra+ckpt")


def test_parameter_count_matches_real_models():
    from azllm.model import build_model, model_config

    cfg = model_config("tiny", 1000, **{k: v for k, v in CFG.items() if k != "vocab_size"})
    model = build_model(cfg, seed=0)
    real = sum(p.numel() for p in model.parameters())
    assert mem.parameter_count(cfg)["total"] == real == N_PARAMS
    assert mem.predict_memory(cfg, "baseline", 1, 8)["weights"] == sum(
        p.numel() * p.element_size() for p in model.parameters()
    )


def test_lora_count_matches_peft():
    from azllm.lora import apply_lora
    from azllm.model import build_model, model_config

    cfg = model_config("tiny", 1000, **{k: v for k, v in CFG.items() if k != "vocab_size"})
    peft_model = apply_lora(build_model(cfg, seed=0), r=8, alpha=16, dropout=0.05)
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    assert mem.predict_memory(cfg, mem.parse_variant("lora", lora_r=8), 1, 8)["trainable"] == trainable


def test_lora_activations_by_hand():
    T, h, i, q, kv, nh, r = 8, 64, 128, 64, 32, 4, 16
    ins = 64 + 64 + 64 + 64 + 64 + 64 + 128  # inputs of q, k, v, o, gate, up, down
    # frozen norms save only their fp32 input; q/k/v/attention out/lse as in full training; MLP: gate, silu, up;
    # adapters (fp32, input cast to fp32): dropped input + mask (bool on CUDA, fp32 noise on CPU) + rank-r output
    base = 2 * 4 * h + 4 * (q + 2 * kv) + 4 * q + 4 * nh + 3 * 4 * i
    lora = mem.parse_variant("lora")
    assert mem.layer_activation_bytes(CFG, lora, T, "cuda") == T * (base + (4 + 1) * ins + 7 * 4 * r)
    assert mem.layer_activation_bytes(CFG, lora, T, "cpu") == T * (base + (4 + 4) * ins + 7 * 4 * r)
    # bf16 model: the base's tensors halve, the adapters' stay fp32
    b = mem.parse_variant("lora+bf16")
    base16 = 2 * 4 * h + 2 * (q + 2 * kv) + 2 * q + 4 * nh + 3 * 2 * i
    assert mem.layer_activation_bytes(CFG, b, T, "cuda") == T * (base16 + (4 + 1) * ins + 7 * 4 * r)
