"""How close a GGUF file is to what it came from (the checks of :func:`azllm.deploy.deploy`):

- :func:`logit_check`: the GGUF's logits against the PyTorch model's on the same ids (largest difference, top-1
  agreement);
- :func:`quant_quality`: a quantized file against the F16 one, with llama.cpp's ``--kl-divergence`` statistics
  computed in float64 (:func:`quality_from_logits`: mean KL, the perplexity ratio with its paired standard error,
  same top-1 share).
"""

from __future__ import annotations

import os

from .gguf_runtime import DeployError, llama_ids, llama_log, open_llama, require_llama_cpp

__all__ = ["logits_model", "logit_check", "quality_from_logits", "quant_quality"]

Pathish = str | os.PathLike


def logits_model(gguf_file, n_ctx: int, threads: int, logits_all: bool = True):
    n = max(int(n_ctx), 16)
    kw = {"n_ctx": n, "n_batch": n, "n_ubatch": n, "n_threads": threads, "n_threads_batch": threads}
    return open_llama(gguf_file, logits_all=logits_all, **kw)


def _llama_logits(llm, ids: list[int]):
    import numpy as np

    with llama_log():
        llm.reset()
        llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float64)


def logit_check(gguf_file: Pathish, model_folder: Pathish, texts: list[str], *, threads: int = 2) -> dict:
    """The GGUF's logits against the PyTorch model's (fp32) on the same ids (the HF tokenizer's, no special tokens
    added): largest absolute difference, the largest logit for scale, top-1 agreement share, positions compared.

    >>> logit_check("model-F16.gguf", folder, az[:5])["top1_agreement"]  # doctest: +SKIP
    1.0
    """
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    require_llama_cpp()
    tok = AutoTokenizer.from_pretrained(str(model_folder))
    seqs = [ids for ids in (list(tok.encode(t, add_special_tokens=False)) for t in texts) if ids]
    if not seqs:
        raise DeployError("logit_check: no text gave a token")
    model = AutoModelForCausalLM.from_pretrained(str(model_folder), dtype=torch.float32).eval()
    llm = logits_model(gguf_file, max(map(len, seqs)), threads)
    diff, scale, agree, n, was = 0.0, 0.0, 0, 0, torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for ids in seqs:
            with torch.no_grad():
                ref = model(torch.tensor([ids])).logits[0].double().numpy()
            got = _llama_logits(llm, ids)
            diff, scale = max(diff, float(np.abs(ref - got).max())), max(scale, float(np.abs(ref).max()))
            agree, n = agree + int((ref.argmax(-1) == got.argmax(-1)).sum()), n + len(ids)
    finally:
        torch.set_num_threads(was)
    return {"max_abs_diff": diff, "max_abs_logit": scale, "top1_agreement": agree / n, "positions": n}


def _position_terms(ref_logits, quant_logits, targets) -> dict:
    """Per position (rows of ``(T, V)`` logits predicting ``targets``): KL(ref || quant), both NLLs, same top-1."""
    import numpy as np

    def log_softmax(x):
        x = np.asarray(x, dtype=np.float64)
        m = x.max(-1, keepdims=True)
        return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))

    lp, lq = log_softmax(ref_logits), log_softmax(quant_logits)
    rows, t = np.arange(len(lp)), np.asarray(targets)
    kld = (np.exp(lp) * (lp - lq)).sum(-1)
    return {"kld": kld, "nll_ref": -lp[rows, t], "nll_quant": -lq[rows, t], "same_top": lq.argmax(-1) == lp.argmax(-1)}


def quality_from_logits(ref_logits: list, quant_logits: list, targets: list) -> dict:
    """llama.cpp's ``--kl-divergence`` statistics in float64, from per-sequence ``(T, V)`` logits of the reference
    and the quantized model and the ``T`` tokens their rows predict: mean KL(ref || quant) (± se, median, p99, max),
    PPL(quant)/PPL(ref) = exp(mean NLL_quant - mean NLL_ref) (± the paired se), same top-1 share (±), RMS change of
    the next token's probability (``rms_dp``), positions.

    >>> quality_from_logits([[[0.0, 0.0]]], [[[0.0, 0.0]]], [[1]])["mean_kld"]
    0.0
    """
    import numpy as np

    terms = [_position_terms(r, q, t) for r, q, t in zip(ref_logits, quant_logits, targets)]
    t = {k: np.concatenate([d[k] for d in terms]) for k in terms[0]}
    n, kld, same = len(t["kld"]), t["kld"], float(t["same_top"].mean())
    diff = t["nll_quant"] - t["nll_ref"]
    stats = [(float(x.mean()), float(x.std() / np.sqrt(n - 1)) if n > 1 else float("nan")) for x in (kld, diff)]
    (mean_kld, kld_se), (ln_ratio, ln_se) = stats  # llama.cpp's mean_and_uncertainty: sqrt((<x²> - <x>²) / (n - 1))
    dp = np.exp(-t["nll_quant"]) - np.exp(-t["nll_ref"])
    out = {"mean_kld": mean_kld, "kld_se": kld_se, "kld_median": float(np.median(kld)), "kld_max": float(kld.max())}
    out.update(kld_p99=float(np.percentile(kld, 99)), ln_ppl_ratio=ln_ratio, ln_ppl_ratio_se=ln_se)
    out.update(ppl_ratio=float(np.exp(ln_ratio)), ppl_ratio_se=float(np.exp(ln_ratio) * ln_se))
    out.update(ppl_ref=float(np.exp(t["nll_ref"].mean())), ppl_quant=float(np.exp(t["nll_quant"].mean())))
    se = float(np.sqrt(same * (1 - same) / (n - 1))) if n > 1 else float("nan")
    return out | {"same_top1": same, "same_top1_se": se, "rms_dp": float(np.sqrt(np.mean(dp**2))), "positions": n}


def quant_quality(ref_gguf: Pathish, quant_gguf: Pathish, texts: list[str], *, n_ctx=512, threads=2) -> dict:
    """:func:`quality_from_logits` of ``quant_gguf`` against ``ref_gguf`` (the F16 file) on ``texts``, each text
    its own sequence (the reference's tokens, with BOS if the GGUF asks for one, cut to ``n_ctx``), every position.

    >>> quant_quality("model-F16.gguf", "model-Q4_K_M.gguf", az[:20])["ppl_ratio"]  # doctest: +SKIP
    """
    require_llama_cpp()
    seqs = llama_ids(ref_gguf, texts, add_bos=True, special=False)
    cut, seqs = sum(len(s) > n_ctx for s in seqs), [s[:n_ctx] for s in seqs if len(s) >= 2]
    if not seqs:
        raise DeployError("quant_quality: no text of two tokens or more")
    ref, quant = (logits_model(p, max(map(len, seqs)), threads) for p in (ref_gguf, quant_gguf))
    logits = [(_llama_logits(ref, s)[:-1], _llama_logits(quant, s)[:-1]) for s in seqs]
    return quality_from_logits(*zip(*logits), [s[1:] for s in seqs]) | {"texts": len(seqs), "texts_cut": cut}
