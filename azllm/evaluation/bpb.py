"""Bits per byte of a causal language model on plain documents: how well it still models a language's text.

The preference stage reads it on held-out English text (``adapt.english_eval``: English Wikipedia that no stage
trains or replays) as the English guard of its sweep: a setting that makes the model a worse English model is one
whose English is drifting, measured on text that no verdict reads (the verdict's English measures, FLORES az→en and
the SIB-200 probe, stay unread by every choice).

- :func:`document_bpb`: one value per document, ``bits / bytes``: the model's summed negative log2-likelihood of
  the document's tokens after the first (the first is context only), over the UTF-8 bytes of those tokens' text.
  A document is cut at ``max_tokens`` tokens; the batch is right-padded and the padding never counts.
- :func:`bpb_change`: two models on the same documents, paired (:func:`azllm.evaluation.compare.difference`;
  lower is better): the mean per-document value before and after, the difference, its standard error and verdict.

Per-document values, not one pooled ratio: a document is the unit the standard error is taken over, as an answer
is for chrF++ and an item is for a task. The tokenizer is the same for both models of a change, so the bytes of a
document are too, and the comparison is exact whatever the tokenizer does with the first token.
"""

from __future__ import annotations

import math

__all__ = ["document_bpb", "bpb_change"]


def document_bpb(model, tokenizer, docs: list[str], *, max_tokens: int = 256, batch_size: int = 8) -> list[float]:
    """Bits per byte of each document of ``docs`` under ``model`` (module docstring), in the order given.

    A document of fewer than two tokens has nothing to predict: a ValueError names it."""
    import torch

    ids = [tokenizer(d, add_special_tokens=False)["input_ids"][:max_tokens] for d in docs]
    for i, x in enumerate(ids):
        if len(x) < 2:
            raise ValueError(f"document {i} has {len(x)} token(s): bits per byte needs at least two")
    nbytes = [len(tokenizer.decode(x[1:]).encode("utf-8")) for x in ids]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    bits = [0.0] * len(ids)
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(ids), batch_size):
            batch = ids[start : start + batch_size]
            width = max(len(x) for x in batch)
            inp = torch.tensor([x + [pad] * (width - len(x)) for x in batch])
            mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in batch])
            with torch.no_grad():
                logits = model(input_ids=inp, attention_mask=mask).logits[:, :-1].float()
            nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), inp[:, 1:], reduction="none")
            nll = (nll * mask[:, 1:]).sum(dim=1) / math.log(2)
            for j, v in enumerate(nll.tolist()):
                bits[start + j] = v
    finally:
        model.train(was_training)
    return [b / n for b, n in zip(bits, nbytes)]


def bpb_change(before: list[float], after: list[float], *, z: float = 1.96) -> dict:
    """The per-document bits per byte of one model (``before``) against another's on the same documents
    (``after``), paired; lower is better, so a rise beyond the noise is a ``loss``: ``{"before", "after", "delta",
    "delta_se", "verdict", "mde", "n"}`` (means over the documents).

    >>> r = bpb_change([1.0, 1.2, 0.9, 1.1], [1.1, 1.3, 1.0, 1.2])
    >>> round(r["delta"], 3), r["verdict"]
    (0.1, 'loss')
    """
    from .compare import change_row

    if len(before) != len(after) or not before:
        raise ValueError(f"bpb_change needs the same documents on both sides, not {len(before)} and {len(after)}")
    b = {"value": sum(before) / len(before), "items": list(before)}
    a = {"value": sum(after) / len(after), "items": list(after)}
    return change_row(b, a, z=z, higher_is_better=False)
