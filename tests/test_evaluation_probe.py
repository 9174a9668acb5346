"""azllm.evaluation.probe: mean-pooled features that padding does not change, a probe that finds a planted signal
and not a shuffled one, deterministic results, and clear errors for unusable splits."""

import numpy as np
import pytest
from eval_helpers import gpt2_model, gpt2_tok  # noqa: F401  (fixtures)

from azllm.evaluation.probe import ProbeError, cross_validated_probe, hidden_features, linear_probe, probe_task
from conftest import FIXTURES, TINY_MODEL


@pytest.fixture(scope="module")
def tok(gpt2_tok):
    return gpt2_tok


@pytest.fixture(scope="module")
def model(gpt2_model):
    return gpt2_model


def _lines(name, n):
    path = FIXTURES / f"data/az/dev/flores200.dev.{name}.txt"
    return path.read_text(encoding="utf-8").splitlines()[:n]


def test_features_do_not_depend_on_padding_batching_or_order(model, tok):
    texts = ["Salam.", "Bakı Azərbaycanın paytaxtıdır və Xəzər dənizinin sahilində yerləşir.", "Bu gün hava gözəldir."]
    alone = np.stack([hidden_features(model, tok, [t], batch_size=1)[0] for t in texts])
    batched = hidden_features(model, tok, texts, batch_size=3)
    assert batched.shape == (3, TINY_MODEL["hidden_size"]) and batched.dtype == np.float32
    np.testing.assert_allclose(batched, alone, atol=1e-5)
    np.testing.assert_allclose(hidden_features(model, tok, texts[::-1], batch_size=2), alone[::-1], atol=1e-5)
    tok.padding_side = "left"
    try:
        np.testing.assert_allclose(hidden_features(model, tok, texts, batch_size=3), alone, atol=1e-5)
    finally:
        tok.padding_side = "right"
    emb = hidden_features(model, tok, texts[:1], layer=0)[0]  # layer 0: the mean of the token embeddings
    ids = tok(texts[0])["input_ids"]
    np.testing.assert_allclose(emb, model.get_input_embeddings().weight[ids].mean(0).detach().numpy(), atol=1e-6)
    assert not np.allclose(alone[0], alone[1])
    import torch  # the last layer equals a plain forward's (the LM head asked for one position only changes nothing)

    with torch.no_grad():
        last = model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0].mean(0)
    np.testing.assert_allclose(alone[0], last.numpy(), atol=1e-6)


def test_features_restore_the_models_mode_and_truncate(model, tok):
    model.train()
    long = " ".join(_lines("azj_Latn", 5))
    a = hidden_features(model, tok, [long], max_length=8)
    assert model.training
    model.eval()
    np.testing.assert_allclose(
        a, hidden_features(model, tok, [tok.decode(tok(long)["input_ids"][:8])], max_length=8), atol=1e-5
    )


def _planted(rng, n, shift):
    y = rng.integers(0, 3, size=n)
    X = rng.normal(size=(n, 16))
    X[np.arange(n), y] += shift  # class k moves feature k
    return X, y


def test_the_probe_finds_a_planted_signal_and_not_a_shuffled_one():
    rng = np.random.default_rng(0)
    Xtr, ytr = _planted(rng, 300, 4.0)
    Xte, yte = _planted(rng, 300, 4.0)
    res = linear_probe(Xtr, ytr, Xte, yte, seed=0)
    assert res["accuracy"] > 0.95 and res["n_classes"] == 3 and res["converged"]
    assert res["stderr"] == pytest.approx(np.sqrt(res["accuracy"] * (1 - res["accuracy"]) / 300))
    assert res["chance_uniform"] == pytest.approx(1 / 3)
    assert res["chance_majority"] == pytest.approx(np.mean(yte == np.bincount(ytr).argmax()))
    # labels shuffled in both splits: nothing links them to the features, so the probe scores chance
    shuffled = linear_probe(Xtr, rng.permutation(ytr), Xte, rng.permutation(yte), seed=0)
    assert abs(shuffled["accuracy"] - 1 / 3) < 3 * shuffled["stderr"]
    assert linear_probe(Xtr, ytr, Xte, yte, seed=0) == res


def test_the_cross_validated_probe_predicts_every_item_once():
    rng = np.random.default_rng(1)
    X, y = _planted(rng, 300, 4.0)
    res = cross_validated_probe(X, y, seed=0, folds=5)
    assert res["accuracy"] > 0.95 and res["n_test"] == 300 and res["n_train"] == 240 and res["folds"] == 5
    assert cross_validated_probe(X, y, seed=0, folds=5) == res
    assert max(np.bincount(y)) / 300 - 0.02 < res["chance_majority"] <= max(np.bincount(y)) / 300
    null = cross_validated_probe(rng.normal(size=(300, 16)), y, seed=0)
    assert abs(null["accuracy"] - 1 / 3) < 3 * null["stderr"]
    with pytest.raises(ProbeError, match="label 2 has 3 items, fewer than folds=5"):
        cross_validated_probe(np.ones((13, 2)), [0] * 5 + [1] * 5 + [2] * 3, seed=0)


def test_bad_splits_are_refused_with_what_to_do():
    X, y = np.ones((4, 3)), np.array([0, 1, 0, 1])
    with pytest.raises(ProbeError, match="train split is empty"):
        linear_probe(np.zeros((0, 3)), [], X, y, seed=0)
    with pytest.raises(ProbeError, match=r"test labels \[2\] never occur in the train split"):
        linear_probe(X, y, X, [0, 1, 2, 1], seed=0)
    with pytest.raises(ProbeError, match="only one label"):
        linear_probe(X, [0, 0, 0, 0], X, y, seed=0)
    with pytest.raises(ProbeError, match="4 feature rows but labels"):
        linear_probe(X, [0, 1], X, y, seed=0)
    with pytest.raises(ProbeError, match="NaN or inf"):
        linear_probe(np.full((4, 3), np.nan), y, X, y, seed=0)


def test_bad_rows_and_texts_are_refused(model, tok):
    with pytest.raises(ProbeError, match="test split is empty"):
        probe_task(model, tok, [("a", "x"), ("b", "y")], [])
    with pytest.raises(ProbeError, match=r"test labels \['z'\] never occur"):
        probe_task(model, tok, [("a", "x"), ("b", "y")], [("c", "z")])
    with pytest.raises(ProbeError, match="train row 1 must be a \\(text, label\\) pair"):
        probe_task(model, tok, [("a", "x"), ("b",)], [("c", "x")])
    with pytest.raises(ProbeError, match="text 1 .* has no tokens"):
        hidden_features(model, tok, ["a", ""])
    with pytest.raises(ProbeError, match="layer 3 is out of range for a model with 2 layers"):
        hidden_features(model, tok, ["a"], layer=3)


def test_a_random_tiny_model_separates_languages_deterministically(model, tok):
    """Real features, real probe: language identity (lexical) is linearly readable even from random weights."""
    az, en = _lines("azj_Latn", 60), _lines("eng_Latn", 60)
    rows = [(t, "az") for t in az] + [(t, "en") for t in en]
    train, test = rows[0:40] + rows[60:100], rows[40:60] + rows[100:120]
    res = probe_task(model, tok, train, test, seed=1)
    assert res["accuracy"] >= 0.9 and res["labels"] == ["az", "en"] and (res["n_train"], res["n_test"]) == (80, 40)
    assert probe_task(model, tok, train, test, seed=1) == res
    cv = probe_task(model, tok, rows, seed=1, folds=4)
    assert cv["accuracy"] >= 0.9 and cv["n_test"] == 120 and cv["folds"] == 4
