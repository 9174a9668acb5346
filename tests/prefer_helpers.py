"""Shared pieces of the preference tests: a tiny base with azllm's chat template, pairs from the fixture
instruction data, a tiny PreferenceSpec."""

from __future__ import annotations

import dataclasses


def tiny_pref_spec(**kw):
    """A PreferenceSpec on the SFT loop's tiny settings (tests/sft_helpers.py) with ``kw`` laid over it."""
    from sft_helpers import tiny_spec

    from azllm.loop import LoopSpec
    from azllm.prefer.train import PreferenceSpec

    sft = tiny_spec()
    loop = {f.name: getattr(sft, f.name) for f in dataclasses.fields(LoopSpec)}
    own = dict(method="dpo", beta=0.1, loss_type="sigmoid", sft_weight=0.0, max_length=128)
    own["precompute_ref_log_probs"] = False
    return PreferenceSpec(**{**loop, **own, **kw})


def model_and_tokenizer(base, method: str = "lora"):
    """The tiny base with azllm's template (role tokens added) and its LoRA config: ``(model, tok, peft_config)``."""
    from transformers import AutoTokenizer

    from azllm.sft.template import prepare_tokenizer
    from azllm.sft.train import lora_config, prepare_model

    tok = AutoTokenizer.from_pretrained(str(base))
    info = prepare_tokenizer(tok, template="azllm")
    model, _ = prepare_model(base, method=method, new_token_ids=info["added_tokens"])
    peft = (
        lora_config(model, r=4, alpha=8, dropout=0.0, new_token_ids=info["added_tokens"]) if method != "full" else None
    )
    return model, tok, peft


def fixture_pairs(conversations: list[dict], n: int = 12) -> list[dict]:
    """Pairs of the fixture conversations: each reference answer chosen over the next conversation's answer."""
    out = []
    for i, c in enumerate(conversations[:n]):
        other = conversations[(i + 1) % n]["messages"][-1]["content"]
        out.append(
            {
                "id": c["id"],
                "source": "fixture",
                "prompt": c["messages"][:-1],
                "chosen": c["messages"][-1:],
                "rejected": [{"role": "assistant", "content": other}],
            }
        )
    return out
