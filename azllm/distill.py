"""Knowledge distillation: a small student learns a teacher's next-token distribution on Azerbaijani text.

The student is a Llama with the teacher's tokenizer; it trains on the same token files, through the same Trainer
path, callbacks, checkpoints, resume and progress as any other run (:func:`azllm.train.run_training` with
:class:`DistillLoss` as its loss). Decisions:

- **The vocabulary must be the teacher's, exactly**: :func:`check_vocab` stops with an error naming both sizes
  otherwise (a student whose rows mean other tokens would learn from wrong log-probabilities without a sign, the
  failure of trl#2215 / trl#4562).
- **Two students of one shape.** :func:`pruned_student` keeps every ``keep_every``-th decoder layer of the teacher
  (layers 0, k, 2k, ...), its embeddings, final norm and head (Minitron-style depth pruning; the width stays, so
  every weight it keeps is a teacher weight). :func:`random_student` is the same shape (or another one) from a
  random init. SmolLM2-135M (30 layers, 576 wide, 53k tokens after extension) with ``keep_every=8`` keeps 4
  layers: 45M parameters, a third of the teacher's (the 30.6M of tied embeddings dominate; a student smaller than
  a third would need a narrower embedding, which pruning by depth does not give).
- **The loss** (:func:`kd_loss`): ``(1 - kd_weight) * CE(student, data) + kd_weight * T**2 * KL(p_T || p_S)``
  per predicted token, where ``p = softmax(logits / T)``: forward KL to the teacher's distribution at temperature
  ``T`` (Hinton et al.; the ``T**2`` keeps the gradient scale of the soft term independent of ``T``), mixed with
  cross-entropy on the data. ``kd_weight = 0`` is the cross-entropy-only baseline (the teacher is not run).
- **One chunk of vocabulary x tokens at a time.** Student and teacher are run to their final hidden states only;
  the head is applied to ``chunk_tokens`` positions at a time inside ``torch.utils.checkpoint``, so the forward
  pass holds one chunk's ``chunk_tokens x V`` logits of each model and the backward pass recomputes them chunk by
  chunk (tested against a direct full-logits computation: same loss and gradients). With a 53k vocabulary, 4 x 256
  tokens and chunks of 256 this is 54 MB of logits alive instead of 218 MB per model.
- **Evaluation** is cross-entropy alone, so a student's eval loss and bits per byte compare with any other run's.
- **What TRL does here**: TRL's ``DistillationTrainer`` / ``GKDTrainer`` distil on prompts, on-policy (the student
  generates, the teacher scores), and compute full ``B x T x V`` logits of both models. azllm's pretraining-style
  distillation reads token files and needs the chunked loss, so it uses the Trainer with this loss; on-policy
  distillation of a chat model is TRL's (``trl.experimental.gkd``), not wrapped here.

>>> import torch
>>> h, w = torch.randn(6, 8), torch.randn(20, 8)
>>> loss, parts = kd_loss(h, w, h, w, torch.arange(6), temperature=2.0, kd_weight=0.5, chunk_tokens=4)
>>> round(parts["kl"], 6)  # the student is the teacher: no divergence
0.0
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from .train import TrainSpec

__all__ = ["DistillSpec", "DistillLoss", "check_vocab", "pruned_student", "random_student", "kd_loss", "VocabMismatch"]


class VocabMismatch(ValueError):
    """A student whose vocabulary is not the teacher's."""


@dataclass(frozen=True)
class DistillSpec(TrainSpec):
    """A distillation run's loop: :class:`azllm.train.TrainSpec` and the loss's fields (named as the ``distill``
    params keys, built by :func:`azllm.recipes.specs.build_spec`)."""

    kd_weight: float
    temperature: float
    chunk_tokens: int


def check_vocab(student, teacher, tokenizer_size: int | None = None) -> int:
    """The shared vocabulary size, or :class:`VocabMismatch` naming the sizes that differ (the student's and the
    teacher's output rows, and the tokenizer's size when given).

    >>> from types import SimpleNamespace as NS
    >>> check_vocab(NS(config=NS(vocab_size=5)), NS(config=NS(vocab_size=5)))
    5
    """
    s, t = int(student.config.vocab_size), int(teacher.config.vocab_size)
    sizes = {"student": s, "teacher": t}
    if tokenizer_size is not None:
        sizes["tokenizer"] = int(tokenizer_size)
    if len(set(sizes.values())) != 1:
        raise VocabMismatch(
            f"the student must use the teacher's vocabulary exactly: vocab sizes {sizes}. Build the student with the "
            "teacher's tokenizer (pruned_student, or random_student with vocab_size=teacher.config.vocab_size); a "
            "student whose rows mean other tokens would learn from wrong log-probabilities"
        )
    return s


def pruned_student(teacher, *, keep_every: int):
    """A copy of ``teacher`` (a ``LlamaForCausalLM``) with every ``keep_every``-th decoder layer (0, k, 2k, ...),
    its embeddings, final norm and head (module docstring). The teacher is not changed."""
    if keep_every < 1:
        raise ValueError(f"keep_every must be >= 1, got {keep_every}")
    layers = list(range(0, teacher.config.num_hidden_layers, keep_every))
    cfg = copy.deepcopy(teacher.config)
    cfg.num_hidden_layers = len(layers)
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = [cfg.layer_types[i] for i in layers]
    student = type(teacher)(cfg).to(next(teacher.parameters()).dtype)
    state = teacher.state_dict()
    new = {}
    for k, v in state.items():
        if k.startswith("model.layers."):
            i, rest = k[len("model.layers.") :].split(".", 1)
            if int(i) in layers:
                new[f"model.layers.{layers.index(int(i))}.{rest}"] = v.clone()
        else:
            new[k] = v.clone()
    missing, unexpected = student.load_state_dict(new, strict=False)
    tied = {"lm_head.weight"} if cfg.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise ValueError(f"pruning left weights unmatched: missing {missing}, unexpected {unexpected}")
    student.tie_weights()
    student.generation_config = copy.deepcopy(teacher.generation_config)
    return student


def random_student(teacher_config, *, seed: int, **shape):
    """A random-init ``LlamaForCausalLM`` with the teacher's vocabulary, special ids and RoPE, and ``shape``
    (``LlamaConfig`` fields, e.g. ``num_hidden_layers=4``) laid over the teacher's config."""
    from .model import build_model

    cfg = copy.deepcopy(teacher_config)
    for k, v in shape.items():
        setattr(cfg, k, v)
    if "num_hidden_layers" in shape and getattr(cfg, "layer_types", None):
        cfg.layer_types = cfg.layer_types[: cfg.num_hidden_layers]
    return build_model(cfg, seed=seed)


def _chunk_terms(h_s, w_s, h_t, w_t, y, temperature: float, kd: bool):
    """Summed cross-entropy and summed forward KL of one chunk (``h_*``: hidden states, ``w_*``: head weights)."""
    z = (h_s @ w_s.T).float()
    ce = F.cross_entropy(z, y, reduction="sum")
    if not kd:
        return ce, ce.new_zeros(())
    with torch.no_grad():
        log_p = F.log_softmax((h_t @ w_t.T).float() / temperature, dim=-1)
    log_q = F.log_softmax(z / temperature, dim=-1)
    return ce, (log_p.exp() * (log_p - log_q)).sum()


def kd_loss(
    student_hidden,
    student_head,
    teacher_hidden,
    teacher_head,
    labels,
    *,
    temperature: float,
    kd_weight: float,
    chunk_tokens: int,
) -> tuple[torch.Tensor, dict]:
    """``(loss, {"ce", "kl"})`` over the positions whose label is not -100 (module docstring): ``*_hidden`` are
    ``(N, H)`` final hidden states of the predicting positions, ``*_head`` the ``(V, H)`` output weights, ``labels``
    ``(N,)`` the next tokens. The head is applied ``chunk_tokens`` positions at a time, each chunk recomputed in
    the backward pass."""
    keep = labels != -100
    h_s, y = student_hidden[keep], labels[keep]
    n = max(int(y.numel()), 1)
    kd = kd_weight > 0
    h_t = teacher_hidden[keep] if kd else h_s
    ce_sum, kl_sum = (
        student_hidden.new_zeros((), dtype=torch.float32),
        student_hidden.new_zeros((), dtype=torch.float32),
    )
    for i in range(0, y.numel(), chunk_tokens):
        sl = slice(i, i + chunk_tokens)
        ce, kl = checkpoint(
            _chunk_terms,
            h_s[sl],
            student_head,
            h_t[sl],
            teacher_head if kd else student_head,
            y[sl],
            temperature,
            kd,
            use_reentrant=False,
        )
        ce_sum, kl_sum = ce_sum + ce, kl_sum + kl
    ce, kl = ce_sum / n, kl_sum / n
    loss = (1 - kd_weight) * ce + kd_weight * temperature**2 * kl if kd else ce
    return loss, {"ce": float(ce.detach()), "kl": float(kl.detach()), "tokens": int(y.numel())}


def _hidden(model, input_ids, attention_mask=None):
    """The final (normed) hidden states of a causal LM's decoder, without its head."""
    base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    return base(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state


class DistillLoss:
    """The loss of a distillation run for :func:`azllm.train.run_training` (``loss_fn``): called as
    ``loss_fn(model, inputs)`` with the Trainer's batch (``input_ids``, ``labels``; the model shifts nothing here:
    position ``t`` predicts label ``t + 1``). Training: :func:`kd_loss` against ``teacher`` (frozen, in eval mode,
    moved to the batch's device on first use); evaluation: cross-entropy alone (comparable bits per byte)."""

    def __init__(self, teacher, *, kd_weight: float, temperature: float, chunk_tokens: int):
        if not 0.0 <= kd_weight <= 1.0:
            raise ValueError(f"kd_weight must be in [0, 1], got {kd_weight}")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.teacher = teacher.eval().requires_grad_(False) if teacher is not None else None
        if kd_weight > 0 and teacher is None:
            raise ValueError("a distillation loss with kd_weight > 0 needs a teacher")
        self.kd_weight, self.temperature, self.chunk_tokens = float(kd_weight), float(temperature), int(chunk_tokens)
        self.last: dict = {}

    def __call__(self, model, inputs: dict) -> torch.Tensor:
        ids = inputs["input_ids"]
        labels = inputs.get("labels", ids)
        mask = inputs.get("attention_mask")
        h_s = _hidden(model, ids, mask)[:, :-1].reshape(-1, model.config.hidden_size)
        y = labels[:, 1:].reshape(-1)
        kd = model.training and self.kd_weight > 0
        if kd:
            if next(self.teacher.parameters()).device != ids.device:
                self.teacher.to(ids.device)
            with torch.no_grad():
                h_t = _hidden(self.teacher, ids, mask)[:, :-1].reshape(-1, self.teacher.config.hidden_size)
            w_t = self.teacher.get_output_embeddings().weight
        else:
            h_t, w_t = h_s, None
        loss, self.last = kd_loss(
            h_s,
            model.get_output_embeddings().weight,
            h_t,
            w_t,
            y,
            temperature=self.temperature,
            kd_weight=self.kd_weight if kd else 0.0,
            chunk_tokens=self.chunk_tokens,
        )
        return loss
