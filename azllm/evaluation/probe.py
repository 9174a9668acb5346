"""A linear probe: how much of a labelled task a model's hidden states hold, readable even where the model is
too small to answer the task. Mean-pooled hidden states of the train split -> a logistic regression
(scikit-learn) -> accuracy on the other split, with its standard error and two chance levels.

Why: a 1-2M-parameter stand-in answers multiple-choice tasks (SIB-200 topics, TUMLU, MMLU) at chance, so their
before/after numbers are noise on CPU. A probe does not ask the model to *say* the answer, only to *hold* it in
a linearly readable form, so it can tell models apart where multiple-choice accuracy cannot (SmolLM2 against
random weights, below).

- :func:`hidden_features`: one vector per text, the mean of a layer's hidden states over the text's real tokens
  (the attention mask; padding never counts). The batch is always right-padded by this module whatever the
  tokenizer's ``padding_side``: a Llama computes positions from the sequence index, not from the mask, so
  left padding would move every token of the shorter texts to other positions. Texts are batched by length
  (less padding) and returned in the order given; the tokenizer adds its own special tokens as it does by
  default (SmolLM2: none), the same convention as lm-eval's scoring.
- :func:`linear_probe`: features standardized on the train split, L2-regularized multinomial logistic
  regression (lbfgs, deterministic; ``C`` the inverse regularization), accuracy on the test split.
- :func:`cross_validated_probe`: the same over stratified folds of one labelled set, so every item is a test
  item once: the shared SIB-200 splits are small (373 train, 47 dev), and 47 test items give a standard error of
  about 7 points, too wide to tell models apart; 5 folds over train + dev (420 items) give about 2.4.
- :func:`probe_task`: either, on ``(text, label)`` rows.

**Chance levels.** ``chance_uniform`` is 1 / number of classes; ``chance_majority`` is the score of always
answering the train split's most frequent class (on SIB-200 dev 27.7%, in 5 folds over train + dev 24.8%, against
a uniform 14.3%). Both are floors for a classifier that sees nothing; a probe sees the tokens, so the floor that
says "the model learned something" is the same probe on a **randomly initialised model** with the same tokenizer.

**Measured** (SIB-200, 7 topics, last layer, seed 0; 5 folds over train + dev, 420 items, ± one standard error):

==============================================  ================  ===============
model                                           Azerbaijani       English
==============================================  ================  ===============
SmolLM2-135M-Instruct (the GGUF's folder)       40.0 ± 2.4        81.7 ± 1.9
random init, tests' TINY_MODEL shape (64 wide)  30.0 ± 2.2        23.6 ± 2.1
random init, SmolLM2's shape (135M)             26.0 ± 2.1        23.8 ± 2.1
==============================================  ================  ===============

All three use SmolLM2's tokenizer. Two CPU cores: 40 s (Azerbaijani) and 67 s (English, from a cold start)
for SmolLM2's features of the 420 items, 3-6 s for the tiny model.

**Which numbers are informative at which model size.**

- *Tiny stand-ins (1-10M parameters, a few hundred CPU steps).* Multiple-choice accuracy sits at chance and says
  nothing. Bits per byte and this probe's gain over the random-init model of the same shape are the numbers to
  read. A random model scores near the majority floor (in Azerbaijani the tiny one a little above it, from
  the tokens alone), so a trained stand-in counts as better only above its own random-init score.
- *Small real models (~100M, SmolLM2-135M).* The probe is far above random init in English and clearly above
  it in Azerbaijani, while the multiple-choice tasks begin to move only in English (zero-shot SIB-200 ``acc`` 0.53
  on dev, 0.60 on a test split, against 0.14). For Azerbaijani before/after adaptation at this size, the probe and
  bpb are
  the signal.
- *1B and up* (expected, not measured here). Multiple-choice accuracy (``acc``) is the headline. The probe
  nears its ceiling and mainly checks that adaptation did not destroy the representations: a drop is a
  warning.

A before/after change counts only when it exceeds twice the standard error of the difference,
``2 * sqrt(se_a**2 + se_b**2)`` (about 6.5 points at 420 items near 40%). This is conservative for two models
scored on the same items. Use another split than the probe's train split (SIB-200: train -> dev, or train + dev
-> test for the 204-item test split), or folds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from ..utils import progress

__all__ = ["hidden_features", "linear_probe", "cross_validated_probe", "probe_task", "ProbeError"]


class ProbeError(ValueError):
    """Input a probe cannot use: an empty split, a label the train split lacks, features of the wrong shape."""


def _encode(tokenizer, texts: Sequence[str], max_length: int) -> list[list[int]]:
    if not callable(tokenizer):
        raise ProbeError(f"tokenizer must be a Hugging Face tokenizer (callable), got {type(tokenizer).__name__}")
    ids = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    for i, row in enumerate(ids):
        if not row:
            raise ProbeError(f"text {i} ({texts[i]!r}) has no tokens: drop empty texts before probing")
    return ids


def _check_layer(model, layer: int) -> int:
    n = int(model.config.num_hidden_layers) + 1  # hidden_states: the embeddings, then one per layer
    if not -n <= layer < n:
        raise ProbeError(
            f"layer {layer} is out of range for a model with {n - 1} layers (use -{n}..{n - 1}; "
            "-1 is the last layer, 0 the embeddings)"
        )
    return layer


def hidden_features(
    model, tokenizer, texts: Sequence[str], *, layer: int = -1, batch_size: int = 16, max_length: int = 128
) -> np.ndarray:
    """Mean-pooled hidden states of ``layer`` (``-1`` the last, ``0`` the embeddings), one float32 row per text,
    in the order of ``texts``; see the module docstring. The model runs in eval mode under ``torch.no_grad``
    (its training mode is restored after), on its own device; progress goes to the terminal."""
    import torch

    texts = list(texts)
    if not texts:
        raise ProbeError("hidden_features needs at least one text, got none")
    if bad := [i for i, t in enumerate(texts) if not isinstance(t, str)]:
        raise ProbeError(f"texts must be strings; item {bad[0]} is {type(texts[bad[0]]).__name__}")
    if batch_size < 1 or max_length < 1:
        raise ProbeError(f"batch_size and max_length must be >= 1, got {batch_size} and {max_length}")
    _check_layer(model, layer)
    ids = _encode(tokenizer, texts, max_length)
    pad = next(
        (
            t
            for t in (getattr(tokenizer, "pad_token_id", None), getattr(tokenizer, "eos_token_id", None))
            if t is not None
        ),
        0,
    )  # any id: padded positions are masked out of attention and pooling
    order = sorted(range(len(ids)), key=lambda i: (len(ids[i]), i))
    out = np.zeros((len(ids), int(model.config.hidden_size)), dtype=np.float32)
    device, was_training = next(model.parameters()).device, model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in progress(range(0, len(order), batch_size), desc="probe features", unit="batch"):
                rows = order[start : start + batch_size]
                width = max(len(ids[i]) for i in rows)
                x = torch.full((len(rows), width), pad, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for j, i in enumerate(rows):
                    x[j, : len(ids[i])] = torch.tensor(ids[i])
                    mask[j, : len(ids[i])] = 1
                hs = _hidden_states(model, x.to(device), mask.to(device))[layer].float()
                m = mask.to(device).unsqueeze(-1).to(hs.dtype)
                out[rows] = ((hs * m).sum(1) / m.sum(1)).cpu().numpy()
    finally:
        model.train(was_training)
    return out


def _hidden_states(model, x, mask):
    """Every layer's hidden states of one batch. The LM head is asked for the last position only
    (``logits_to_keep=1``): with SmolLM2's 49k vocabulary, logits for every position were a fifth of the forward pass
    and 400 MB per batch that the probe never reads. A model whose forward lacks that argument is run as it is."""
    try:
        return model(input_ids=x, attention_mask=mask, output_hidden_states=True, logits_to_keep=1).hidden_states
    except TypeError:
        return model(input_ids=x, attention_mask=mask, output_hidden_states=True).hidden_states


def _check_split(name: str, X, y) -> tuple[np.ndarray, np.ndarray]:
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y)
    if X.ndim != 2 or len(X) == 0:
        raise ProbeError(
            f"the {name} split is empty or not 2-D features (shape {X.shape}): it needs rows of features, one per item"
        )
    if y.ndim != 1 or len(y) != len(X):
        raise ProbeError(f"the {name} split has {len(X)} feature rows but labels of shape {y.shape}")
    if not np.isfinite(X).all():
        raise ProbeError(f"the {name} split's features hold NaN or inf (row {int(np.argwhere(~np.isfinite(X))[0, 0])})")
    return X, y


def _fit_predict(Xtr, ytr, Xte, *, seed: int, C: float) -> tuple[np.ndarray, bool]:
    """Predictions of a standardized logistic regression fitted on ``(Xtr, ytr)``, and whether lbfgs converged."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=5000, random_state=seed))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        clf.fit(Xtr, ytr)
    return clf.predict(Xte), not any(issubclass(w.category, ConvergenceWarning) for w in caught)


def _classes(ytr: np.ndarray, yte: np.ndarray, where: str) -> list:
    classes = sorted(set(ytr.tolist()))
    if len(classes) < 2:
        raise ProbeError(f"the train {where} has only one label ({classes}): a probe needs at least two classes")
    if unseen := sorted(set(yte.tolist()) - set(classes)):
        raise ProbeError(
            f"test labels {unseen} never occur in the train {where}, so the probe cannot predict "
            "them: use splits with the same label set"
        )
    return classes


def _result(correct: np.ndarray, majority_correct: np.ndarray, n_classes: int, **extra) -> dict:
    p = float(correct.mean())
    return {
        "accuracy": p,
        "stderr": float(np.sqrt(p * (1 - p) / len(correct))),
        "chance_uniform": 1 / n_classes,
        "chance_majority": float(majority_correct.mean()),
        "n_test": len(correct),
        "n_classes": n_classes,
        "correct": [int(c) for c in correct],
        **extra,
    }


def linear_probe(train_X, train_y, test_X, test_y, *, seed: int, C: float = 1.0) -> dict:
    """Fit a logistic regression on standardized ``train_X`` and score it on ``test_X``.

    Returns ``accuracy``, ``stderr`` (binomial, ``sqrt(p(1-p)/n_test)``), ``chance_uniform`` (1 / ``n_classes``),
    ``chance_majority`` (the share of the test items whose label is the train split's most frequent one: the
    score of always answering it), ``n_train``, ``n_test``, ``n_classes``, ``C``, ``seed``, ``converged`` and
    ``correct`` (1/0 per test item,
    in order: what a paired before/after comparison reads).
    The same inputs and ``seed`` give the same result.
    """
    Xtr, ytr = _check_split("train", train_X, train_y)
    Xte, yte = _check_split("test", test_X, test_y)
    if Xtr.shape[1] != Xte.shape[1]:
        raise ProbeError(f"train features have {Xtr.shape[1]} columns, test features {Xte.shape[1]}")
    classes = _classes(ytr, yte, "split")
    pred, converged = _fit_predict(Xtr, ytr, Xte, seed=seed, C=C)
    majority = Counter(ytr.tolist()).most_common(1)[0][0]
    return _result(pred == yte, yte == majority, len(classes), n_train=len(ytr), C=C, seed=seed, converged=converged)


def cross_validated_probe(X, y, *, seed: int, folds: int = 5, C: float = 1.0) -> dict:
    """:func:`linear_probe` over stratified ``folds`` (shuffled with ``seed``): every item is predicted once by a
    probe that did not see it, so ``n_test`` is all the items and the standard error is ``sqrt(5)`` times
    smaller than one 80/20 split's. ``chance_majority`` is always answering each fold's train majority.
    For small labelled sets (SIB-200's 701 + 99 + 204 items); the keys of :func:`linear_probe` plus ``folds``
    (``n_train`` is the mean train-fold size)."""
    from sklearn.model_selection import StratifiedKFold

    X, y = _check_split("probe", X, y)
    counts = Counter(y.tolist())
    if min(counts.values()) < folds:
        raise ProbeError(
            f"label {min(counts, key=counts.get)!r} has {min(counts.values())} items, fewer than "
            f"folds={folds}: use fewer folds or more data"
        )
    correct, majority_correct, converged, sizes = np.zeros(len(y), bool), np.zeros(len(y), bool), True, []
    for tr, te in StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(X, y):
        _classes(y[tr], y[te], "folds")
        pred, ok = _fit_predict(X[tr], y[tr], X[te], seed=seed, C=C)
        correct[te], converged, sizes = pred == y[te], converged and ok, sizes + [len(tr)]
        majority_correct[te] = y[te] == Counter(y[tr].tolist()).most_common(1)[0][0]
    return _result(
        correct,
        majority_correct,
        len(counts),
        n_train=float(np.mean(sizes)),
        C=C,
        seed=seed,
        converged=converged,
        folds=folds,
    )


def _split(name: str, rows: Iterable) -> tuple[list[str], list]:
    texts, labels = [], []
    for i, row in enumerate(rows):
        if not (isinstance(row, (tuple, list)) and len(row) == 2 and isinstance(row[0], str)):
            raise ProbeError(f"{name} row {i} must be a (text, label) pair with a string text, got {row!r:.80}")
        texts.append(row[0])
        labels.append(row[1])
    if not texts:
        raise ProbeError(f"the {name} split is empty: a probe needs labelled rows in both splits")
    return texts, labels


def probe_task(
    model,
    tokenizer,
    train_rows: Iterable,
    test_rows: Iterable | None = None,
    *,
    seed: int = 0,
    layer: int = -1,
    batch_size: int = 16,
    max_length: int = 128,
    C: float = 1.0,
    folds: int = 5,
) -> dict:
    """:func:`linear_probe` on the :func:`hidden_features` of ``(text, label)`` rows, or, with ``test_rows=None``,
    :func:`cross_validated_probe` over ``folds`` of ``train_rows``; the result also holds ``layer`` and ``labels``
    (the label set, sorted, as strings)."""
    kw = {"layer": layer, "batch_size": batch_size, "max_length": max_length}
    train_t, train_y = _split("train", train_rows)
    train_y = np.asarray([str(v) for v in train_y], dtype=object)
    if test_rows is None:
        res = cross_validated_probe(
            hidden_features(model, tokenizer, train_t, **kw), train_y, seed=seed, folds=folds, C=C
        )
    else:
        test_t, test_y = _split("test", test_rows)
        test_y = np.asarray([str(v) for v in test_y], dtype=object)
        _classes(train_y, test_y, "split")  # before the features are computed
        res = linear_probe(
            hidden_features(model, tokenizer, train_t, **kw),
            train_y,
            hidden_features(model, tokenizer, test_t, **kw),
            test_y,
            seed=seed,
            C=C,
        )
    return {**res, "layer": layer, "labels": sorted(set(train_y.tolist()))}
