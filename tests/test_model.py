"""Model building: presets, seeded random init, int64 ids, the tokenizer swap (mean-of-pieces init beats random
rows on Azerbaijani text; tied and untied embeddings), and Liger's honest CPU fallback."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from train_helpers import data  # noqa: F401

from conftest import FIXTURES, TINY_MODEL

warnings.filterwarnings("ignore")


def test_presets_and_config():
    from azllm.model import PRESETS, model_config

    assert set(PRESETS) >= {"tiny", "125m", "1b"}
    c = model_config("1b", 128256)
    assert (
        c.hidden_size,
        c.num_hidden_layers,
        c.num_attention_heads,
        c.num_key_value_heads,
        c.intermediate_size,
        c.tie_word_embeddings,
    ) == (2048, 16, 32, 8, 8192, True)
    assert c.rope_parameters["rope_theta"] == 500000.0
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        n = sum(p.numel() for p in LlamaForCausalLM(c).parameters())
    assert n == 1_235_814_400  # meta-llama/Llama-3.2-1B's parameter count
    t = model_config("tiny", 1000, num_hidden_layers=1, rope_theta=5000.0)
    assert t.num_hidden_layers == 1 and t.rope_parameters["rope_theta"] == 5000.0 and t.vocab_size == 1000
    with pytest.raises(ValueError, match="unknown model preset"):
        model_config("7b", 1000)
    with pytest.raises(ValueError, match="vocab_size"):
        model_config("tiny", 0)


def test_build_model_is_seeded_and_takes_int64():
    from azllm.model import build_model, model_config

    cfg = model_config("tiny", 300, num_hidden_layers=1)
    a, b, c = build_model(cfg, seed=1), build_model(cfg, seed=1), build_model(cfg, seed=2)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
    assert a.lm_head.weight is a.model.embed_tokens.weight  # tied
    x = torch.randint(0, 300, (2, 8), dtype=torch.int64)
    out = a(input_ids=x, labels=x)
    assert out.logits.shape == (2, 8, 300) and torch.isfinite(out.loss)
    assert build_model(cfg, dtype=torch.bfloat16).lm_head.weight.dtype == torch.bfloat16


def test_liger_without_cuda_is_reported_not_applied():
    if torch.cuda.is_available():
        pytest.skip("this test checks the CPU fallback")
    from azllm.model import LigerError, apply_liger, build_model, liger_available, model_config

    ok, why = liger_available()
    assert not ok and "CUDA" in why
    m = build_model(model_config("tiny", 300, num_hidden_layers=1), seed=0)
    fwd = m.forward
    with pytest.warns(UserWarning, match="NOT applied"):
        r = apply_liger(m, {"rope": True, "fused_linear_cross_entropy": True, "rms_norm": False})
    assert r == {"requested": ["rope", "fused_linear_cross_entropy"], "applied": [], "available": False, "reason": why}
    assert m.forward == fwd  # untouched, and the report says so
    x = torch.randint(0, 300, (1, 8))
    assert m.train()(input_ids=x, labels=x).logits is not None  # plain HF forward
    with pytest.raises(LigerError, match="exclusive"):
        apply_liger(m, ["cross_entropy", "fused_linear_cross_entropy"])
    with pytest.raises(LigerError, match="unknown"):
        apply_liger(m, ["flash"])


# ------------------------------------------------------------------------------------------ tokenizer swap


@pytest.fixture(scope="module")
def swap_setup(data, tmp_path_factory):
    """A small Llama trained briefly with a BPE tokenizer (the 'base'), saved; our unigram tokenizer is the new one."""
    from azllm.data import iter_documents, resolve_source
    from azllm.model import build_model, model_config
    from azllm.tokenizer import load_tokenizer
    from azllm.tokenizer_train import train_tokenizer

    tmp = tmp_path_factory.mktemp("swap")
    docs = list(iter_documents(resolve_source({"path": "data/az/train/*.txt"}, FIXTURES)))
    base_tok = load_tokenizer(train_tokenizer(docs, tmp / "bpe", vocab_size=600, model_type="bpe"))
    ids = np.concatenate([np.array(base_tok.encode(d) + [base_tok.eos_id], dtype=np.int64) for d in docs])
    torch.manual_seed(0)
    out = {}
    for tied in (True, False):
        m = build_model(model_config("tiny", base_tok.vocab_size, **TINY_MODEL, tie_word_embeddings=tied), seed=0)
        opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
        g = torch.Generator().manual_seed(0)
        for _ in range(30 if tied else 0):  # 30 steps: mean init ~0.5 nats better; 0.3 asserted
            ix = torch.randint(len(ids) - 65, (8,), generator=g)
            x = torch.from_numpy(np.stack([ids[i : i + 64] for i in ix.tolist()]))
            m(input_ids=x, labels=x).loss.backward()
            opt.step()
            opt.zero_grad()
        m.save_pretrained(tmp / f"base-{'tied' if tied else 'untied'}")
        out[tied] = tmp / f"base-{'tied' if tied else 'untied'}"
    return {"base_tok": base_tok, "new_tok": data["tokenizer"], "bases": out, "dev": data["dev"]["flores"]}


def _dev_loss(model, tf_path, tok, n=16, B=64):
    from azllm.tokens import TokenFile

    tf = TokenFile(tf_path, tok)
    x = torch.from_numpy(np.asarray(tf.tokens[: n * B], dtype=np.int64).reshape(n, B))
    with torch.no_grad():
        return model.eval()(input_ids=x, labels=x).loss.item()


def _swapped(base, base_tok, new_tok, init="mean"):
    from azllm.assemble import load_base
    from azllm.model import swap_tokenizer_embeddings

    model = load_base(base, torch.float32)
    return model, swap_tokenizer_embeddings(model, base_tok, new_tok, init=init)


def test_tokenizer_swap_mean_init_beats_random_rows(swap_setup):
    s = swap_setup
    base = s["bases"][True]
    mean, c = _swapped(base, s["base_tok"].path, s["new_tok"])
    rand, _ = _swapped(base, s["base_tok"].path, s["new_tok"], init="random")
    assert mean.config.vocab_size == s["new_tok"].vocab_size == mean.model.embed_tokens.weight.shape[0]
    assert mean.lm_head.weight.data_ptr() == mean.model.embed_tokens.weight.data_ptr()  # still tied
    assert c["byte"] == 256 and c["special"] == 3 and c["mean_init"] + c["byte"] + c["special"] + c["fallback"] == 512
    assert c["fallback"] <= 2  # <unk>, and a bare "▁" piece whose text (a space) has no base piece
    l_mean, l_rand = _dev_loss(mean, s["dev"], s["new_tok"]), _dev_loss(rand, s["dev"], s["new_tok"])
    assert l_mean < l_rand - 0.3, (l_mean, l_rand)
    assert mean.config.eos_token_id == s["new_tok"].eos_id


def test_tokenizer_swap_rows_are_means_of_base_pieces_untied(swap_setup):
    from transformers import LlamaForCausalLM

    s = swap_setup
    base_path = s["bases"][False]
    base = LlamaForCausalLM.from_pretrained(base_path)
    m, _ = _swapped(base_path, s["base_tok"].path, s["new_tok"])
    assert m.lm_head.weight.data_ptr() != m.model.embed_tokens.weight.data_ptr()
    new = s["new_tok"]
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(str(Path(new.path) / "tokenizer.json"))
    checked = 0
    for i in range(10, new.vocab_size, 37):
        piece = hf.id_to_token(i)
        if piece.startswith("<0x"):
            continue
        pieces = s["base_tok"].encode(piece.replace("\u2581", " "))
        if len(pieces) > 1 and s["base_tok"].decode(pieces[:1]).strip() == "":
            pieces = pieces[1:]
        want_in = base.model.embed_tokens.weight[pieces].mean(0)
        want_out = base.lm_head.weight[pieces].mean(0)
        assert torch.allclose(m.model.embed_tokens.weight[i], want_in, atol=1e-6)
        assert torch.allclose(m.lm_head.weight[i], want_out, atol=1e-6)
        checked += 1
    assert checked >= 5
    assert torch.equal(m.model.embed_tokens.weight[new.eos_id], base.model.embed_tokens.weight[s["base_tok"].eos_id])


@pytest.mark.parametrize("method", ["lora", "qlora"])
def test_lora_after_a_tokenizer_swap_trains_the_new_rows(swap_setup, method):
    """The model assembly makes a swapped vocabulary trainable under LoRA/QLoRA by default, and says how."""
    from azllm.assemble import assemble_model
    from azllm.config import load_params
    from azllm.lora import embedding_rows, make_optimizer
    from azllm.recipes.train import model_spec

    s = swap_setup
    cfg = load_params(
        None,
        overrides={
            "model": {"base": str(s["bases"][True]), "base_tokenizer": s["base_tok"].path, "config": TINY_MODEL}
        },
    )
    model, info = assemble_model(model_spec(cfg, method), s["new_tok"])
    assert info["new_rows"] == f"{s['new_tok'].vocab_size} new rows: full" and "tokenizer swapped" in info["source"]
    before, _ = embedding_rows(model)
    opt = make_optimizer(model, "adamw", lr=1e-2, weight_decay=0.0, betas=(0.9, 0.95))
    x = torch.randint(0, s["new_tok"].vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    model.train()(input_ids=x, labels=x).loss.backward()
    opt.step()
    after, _ = embedding_rows(model)
    assert (after[x.unique()] - before[x.unique()]).abs().amax(dim=1).min() > 0  # every row the batch used moved


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_extension_keeps_base_rows_and_means_the_new_ones(swap_setup, tied, tmp_path):
    from transformers import LlamaForCausalLM

    from azllm.data import iter_documents, resolve_source
    from azllm.model import extend_embeddings
    from azllm.tokenizer import load_tokenizer
    from azllm.vocab import extend_tokenizer

    s = swap_setup
    docs = list(iter_documents(resolve_source({"path": "data/az/train/*.txt"}, FIXTURES)))
    ext = load_tokenizer(extend_tokenizer(s["base_tok"].path, docs, 100, tmp_path / "ext"))
    n = s["base_tok"].vocab_size
    assert ext.vocab_size == n + 100
    base = LlamaForCausalLM.from_pretrained(s["bases"][tied])
    m = LlamaForCausalLM.from_pretrained(s["bases"][tied])
    counts = extend_embeddings(m, s["base_tok"], ext)
    assert counts["kept"] == n and counts["mean_init"] == 100 and m.config.vocab_size == n + 100
    w_in, w_out = m.get_input_embeddings().weight, m.get_output_embeddings().weight
    assert torch.equal(w_in[:n], base.get_input_embeddings().weight)
    assert torch.equal(w_out[:n], base.get_output_embeddings().weight)
    assert tied == (w_in.data_ptr() == w_out.data_ptr())
    for i in range(n, n + 100, 17):  # each new row: the mean of the base rows of its text's base pieces
        text = ext.decode([i])
        pieces = s["base_tok"].encode(text)
        if len(pieces) > 1 and s["base_tok"].decode(pieces[:1]).strip() == "":
            pieces = pieces[1:]
        assert torch.allclose(w_in[i], base.get_input_embeddings().weight[pieces].mean(0), atol=1e-6), text
    x = torch.tensor([ext.encode(" ".join(docs[:3]))[:64]])
    assert torch.isfinite(m(input_ids=x, labels=x).loss)
    with pytest.raises(ValueError, match="does not extend"):
        extend_embeddings(LlamaForCausalLM.from_pretrained(s["bases"][tied]), ext, s["base_tok"])
    r = LlamaForCausalLM.from_pretrained(s["bases"][tied])  # the random-init control: base rows kept all the same
    assert extend_embeddings(r, s["base_tok"], ext, init="random")["random"] == 100
    assert torch.equal(r.get_input_embeddings().weight[:n], w_in[:n])
    assert not torch.allclose(r.get_input_embeddings().weight[n:], w_in[n:])
