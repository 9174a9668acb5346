"""azllm.evaluation.bpb: bits per byte equal to the model's own loss, whatever the batching; the paired change and
its verdict; clear errors for what cannot be measured."""

import math

import pytest
from eval_helpers import gpt2_model, gpt2_tok  # noqa: F401  (fixtures)

from azllm.evaluation.bpb import bpb_change, document_bpb

DOCS = [
    "Aberdeen is a city in Scotland.",
    "Angola changed from a one-party system to a multiparty democracy in 1992, after a long civil war.",
    "Short one.",
]


def test_each_document_is_the_models_own_loss_in_bits_over_its_bytes(gpt2_model, gpt2_tok):
    model, tok = gpt2_model, gpt2_tok
    import torch

    got = document_bpb(model, tok, DOCS, batch_size=2)
    for doc, value in zip(DOCS, got):
        ids = tok(doc, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            loss = model(input_ids=torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()
        nbytes = len(tok.decode(ids[1:]).encode("utf-8"))
        assert value == pytest.approx(loss * (len(ids) - 1) / math.log(2) / nbytes, rel=1e-4)


def test_padding_batching_and_the_token_cap_act_as_the_docstring_says(gpt2_model, gpt2_tok):
    model, tok = gpt2_model, gpt2_tok
    alone = [document_bpb(model, tok, [d], batch_size=1)[0] for d in DOCS]
    assert document_bpb(model, tok, DOCS, batch_size=3) == pytest.approx(alone, rel=1e-5)
    cut = document_bpb(model, tok, [DOCS[1]], max_tokens=5)[0]
    assert cut == pytest.approx(document_bpb(model, tok, [tok.decode(tok(DOCS[1])["input_ids"][:5])])[0], rel=1e-5)
    assert cut != pytest.approx(alone[1], rel=1e-3)
    model.train()  # the model's mode is put back
    document_bpb(model, tok, DOCS[:1])
    assert model.training
    model.eval()


def test_a_document_with_nothing_to_predict_is_named(gpt2_model, gpt2_tok):
    model, tok = gpt2_model, gpt2_tok
    with pytest.raises(ValueError, match="document 1 has 1 token"):
        document_bpb(model, tok, ["Aberdeen is a city.", "A"])


def test_the_change_is_paired_and_lower_is_better():
    before = [1.00, 1.20, 0.90, 1.10, 1.05]
    worse = [x + 0.05 + 0.001 * i for i, x in enumerate(before)]
    r = bpb_change(before, worse)
    assert r["delta"] == pytest.approx(0.052) and r["verdict"] == "loss" and r["n"] == 5
    assert r["delta_se"] == pytest.approx(0.001 * math.sqrt(2.5 / 5), rel=1e-6)
    assert bpb_change(worse, before)["verdict"] == "gain"
    noisy = [x + d for x, d in zip(before, (0.05, -0.05, 0.04, -0.04, 0.0))]
    assert bpb_change(before, noisy)["verdict"] == "within noise"
    with pytest.raises(ValueError, match="same documents"):
        bpb_change(before, worse[:3])
