"""Distillation (azllm.distill): the chunked KD loss against a direct computation, the vocabulary refusal, the two
students, and a run through the training path (the Trainer, its checkpoints and resume) with the teacher's loss."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from train_helpers import data  # noqa: F401  (fixture)

from azllm.distill import DistillLoss, DistillSpec, VocabMismatch, check_vocab, kd_loss, pruned_student, random_student
from azllm.model import build_model, model_config
from conftest import TINY_MODEL


def _direct(h_s, w_s, h_t, w_t, y, T, w):
    """The loss with the full logits, written out: (1 - w) CE + w T^2 KL(softmax(z_t/T) || softmax(z_s/T))."""
    zs, zt = h_s @ w_s.T, h_t @ w_t.T
    ce = F.cross_entropy(zs, y)
    p = F.softmax(zt / T, -1)
    kl = (p * (F.log_softmax(zt / T, -1) - F.log_softmax(zs / T, -1))).sum(-1).mean()
    return (1 - w) * ce + w * T * T * kl, ce, kl


@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_the_chunked_loss_and_its_gradients_equal_the_direct_computation(chunk):
    g = torch.Generator().manual_seed(0)
    h_s = torch.randn(13, 8, generator=g, dtype=torch.float64, requires_grad=True)
    w_s = torch.randn(50, 8, generator=g, dtype=torch.float64, requires_grad=True)
    h_t, w_t = (
        torch.randn(13, 8, generator=g, dtype=torch.float64),
        torch.randn(50, 8, generator=g, dtype=torch.float64),
    )
    y = torch.randint(0, 50, (13,), generator=g)
    y[3] = -100  # a position without a label is left out of both terms
    keep = y != -100
    want, ce, kl = _direct(h_s[keep], w_s, h_t[keep], w_t, y[keep], 2.0, 0.7)
    gw = torch.autograd.grad(want, (h_s, w_s))
    got, parts = kd_loss(h_s, w_s, h_t, w_t, y, temperature=2.0, kd_weight=0.7, chunk_tokens=chunk)
    gg = torch.autograd.grad(got, (h_s, w_s))
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    assert parts["ce"] == pytest.approx(ce.item(), rel=1e-6) and parts["kl"] == pytest.approx(kl.item(), rel=1e-6)
    assert parts["tokens"] == 12
    for a, b in zip(gg, gw):
        assert torch.allclose(a.double(), b, rtol=1e-5, atol=1e-7)


def test_kd_weight_zero_is_cross_entropy_alone_and_the_teacher_is_not_needed():
    h, w, y = torch.randn(7, 4), torch.randn(11, 4), torch.randint(0, 11, (7,))
    loss, parts = kd_loss(h, w, None, None, y, temperature=3.0, kd_weight=0.0, chunk_tokens=2)
    assert loss.item() == pytest.approx(F.cross_entropy(h @ w.T, y).item(), rel=1e-6) and parts["kl"] == 0.0


def _tiny(vocab=300, layers=4, seed=0):
    return build_model(model_config("tiny", vocab, **{**TINY_MODEL, "num_hidden_layers": layers}), seed=seed)


def test_a_student_with_another_vocabulary_is_refused():
    with pytest.raises(VocabMismatch, match=r"'student': 300, 'teacher': 320"):
        check_vocab(_tiny(300), _tiny(320))
    with pytest.raises(VocabMismatch, match="'tokenizer': 299"):  # a tokenizer one token short
        check_vocab(_tiny(300), _tiny(300), 299)
    assert check_vocab(_tiny(300), _tiny(300), 300) == 300


def test_the_pruned_student_keeps_every_kth_layer_and_the_embeddings():
    teacher = _tiny(layers=4)
    student = pruned_student(teacher, keep_every=2)
    assert student.config.num_hidden_layers == 2 and teacher.config.num_hidden_layers == 4
    ts, ss = teacher.state_dict(), student.state_dict()
    assert torch.equal(ss["model.embed_tokens.weight"], ts["model.embed_tokens.weight"])
    assert torch.equal(ss["model.layers.1.mlp.up_proj.weight"], ts["model.layers.2.mlp.up_proj.weight"])
    assert torch.equal(ss["model.norm.weight"], ts["model.norm.weight"])
    same = pruned_student(teacher, keep_every=1)  # every layer kept: the teacher's function
    x = torch.randint(0, 300, (1, 12))
    assert torch.allclose(same(x).logits, teacher(x).logits, atol=1e-6)
    student.model.embed_tokens.weight.data.zero_()  # a copy, not a view of the teacher
    assert teacher.model.embed_tokens.weight.abs().sum() > 0


def test_the_random_student_has_the_teachers_vocabulary_and_its_own_shape():
    teacher = _tiny(layers=4)
    student = random_student(teacher.config, seed=1, num_hidden_layers=1)
    assert student.config.vocab_size == teacher.config.vocab_size and student.config.num_hidden_layers == 1
    check_vocab(student, teacher)


def test_the_distill_loss_in_evaluation_is_the_models_own_cross_entropy():
    student, teacher = _tiny(layers=2, seed=1), _tiny(layers=4, seed=2)
    x = torch.randint(0, 300, (2, 10))
    loss = DistillLoss(teacher, kd_weight=0.5, temperature=2.0, chunk_tokens=4)
    student.eval()
    with torch.no_grad():
        assert loss(student, {"input_ids": x, "labels": x}).item() == pytest.approx(
            student(input_ids=x, labels=x).loss.item(), rel=1e-5
        )
    with pytest.raises(ValueError, match="needs a teacher"):
        DistillLoss(None, kd_weight=0.5, temperature=2.0, chunk_tokens=4)


def _spec(d, **kw):
    from config_helpers import default_spec

    t = default_spec("train", {"max_steps": 8, "batch_size": 2, "block_size": 32, "eval_steps": 4, "save_steps": 4})
    fields = {**dataclasses.asdict(t), "report_to": (), "logging_steps": 1, "untimed_steps": 1, "precision": "fp32"}
    return DistillSpec(**{**fields, "betas": tuple(fields["betas"]), "kd_weight": 0.5, "temperature": 2.0}, **kw)


def test_a_distillation_run_trains_through_the_training_path_and_resumes(data, tmp_path):
    """The student learns from the teacher on the token files with the Trainer: the loss falls, the eval loss is
    plain cross-entropy (bits per byte comparable), and a longer run in the same folder resumes from the last
    complete checkpoint with the same loss."""
    from azllm.train import run_training

    V = data["tokenizer"].vocab_size
    teacher = build_model(model_config("tiny", V, **TINY_MODEL), seed=3)
    student = pruned_student(teacher, keep_every=2)
    check_vocab(student, teacher)
    loss = DistillLoss(teacher, kd_weight=0.5, temperature=2.0, chunk_tokens=16)
    spec = _spec(data, chunk_tokens=16)
    r = run_training(
        student,
        spec,
        tokenizer=data["tokenizer"],
        train_file=data["train"],
        eval_files={"val": data["val"]},
        output_dir=tmp_path / "kd",
        key="kd",
        loss_fn=loss,
        progress=False,
    )
    assert r["steps"] == 8 and (tmp_path / "kd" / "final" / "config.json").is_file()
    train = [h["loss"] for h in r["curves"]["train"]]
    assert all(math.isfinite(x) for x in train) and train[-1] < train[0]
    assert loss.last["tokens"] > 0 and loss.last["kl"] >= 0  # the last training batch's parts
    assert 0.5 < r["final"]["val"]["bpb"] < 12 and r["final"]["val"]["loss"] < math.log(V) + 1
    longer = dataclasses.replace(spec, max_steps=12)
    r2 = run_training(
        pruned_student(teacher, keep_every=2),
        longer,
        tokenizer=data["tokenizer"],
        train_file=data["train"],
        eval_files={"val": data["val"]},
        output_dir=tmp_path / "kd",
        key="kd",
        loss_fn=loss,
        progress=False,
    )
    assert r2["resumed_from"].endswith("checkpoint-8") and r2["steps"] == 12
