"""azllm.gguf_quality: the quality arithmetic against llama.cpp's definitions, term by term, and a known value
(the real files' logits and quality: tests/test_deploy.py, on tiny converted models)."""

import numpy as np
import pytest

from azllm import gguf_quality as gq


def test_the_quality_arithmetic_is_llama_cpps():
    rng = np.random.default_rng(0)
    ref, quant = rng.normal(size=(2, 7, 11)), rng.normal(size=(2, 7, 11))
    targets = rng.integers(0, 11, size=(2, 7))
    got = gq.quality_from_logits(list(ref), list(quant), list(targets))
    kld, nll_q, nll_r, same = [], [], [], []
    for s in range(2):
        for i in range(7):
            p = np.exp(ref[s, i]) / np.exp(ref[s, i]).sum()
            q = np.exp(quant[s, i]) / np.exp(quant[s, i]).sum()
            kld.append(sum(p[v] * np.log(p[v] / q[v]) for v in range(11)))
            nll_q.append(-np.log(q[targets[s, i]]))
            nll_r.append(-np.log(p[targets[s, i]]))
            same.append(q.argmax() == p.argmax())
    diff = np.array(nll_q) - np.array(nll_r)
    assert got["positions"] == 14 and got["mean_kld"] == pytest.approx(np.mean(kld), rel=1e-12)
    assert got["kld_se"] == pytest.approx(np.std(kld) / np.sqrt(13), rel=1e-9)
    assert got["ppl_ratio"] == pytest.approx(np.exp(diff.mean()), rel=1e-12)
    assert got["ln_ppl_ratio_se"] == pytest.approx(np.std(diff) / np.sqrt(13), rel=1e-9)
    assert got["ppl_ref"] == pytest.approx(np.exp(np.mean(nll_r)), rel=1e-12) and got["same_top1"] == np.mean(same)
    # a known value: p = (1/2, 1/2) against q = (9/10, 1/10)
    half = gq.quality_from_logits([np.log([[0.5, 0.5]])], [np.log([[0.9, 0.1]])], [[1]])
    assert half["mean_kld"] == pytest.approx(0.5 * np.log(0.5 / 0.9) + 0.5 * np.log(0.5 / 0.1), rel=1e-12)
    assert half["ppl_ratio"] == pytest.approx(0.5 / 0.1) and half["same_top1"] == 1.0
    same_logits = gq.quality_from_logits(list(ref), list(ref), list(targets))
    assert same_logits["mean_kld"] == pytest.approx(0, abs=1e-15) and same_logits["ppl_ratio"] == 1.0
