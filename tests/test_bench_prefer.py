"""The preference overhead benchmark's paths do the same work: a bare TRL DPOTrainer and azllm's run_preference,
from the same base, template, adapters and pairs, log the same losses (the ratio it reports is then the cost of
azllm's additions; the speed itself is measured by `azllm bench prefer`, not here). The precomputed-reference path
trains on the same pairs, its reference scored once before training."""

import dataclasses

import pytest
from prefer_helpers import fixture_pairs, tiny_pref_spec
from sft_helpers import conversations, tiny_base  # noqa: F401  (fixtures)

from azllm.bench.prefer import compare_preference, pair_tokens


@pytest.mark.slow  # ~40 s: three fresh processes
def test_bare_trl_and_azllm_log_the_same_dpo_losses_in_fresh_processes(tiny_base, conversations):
    from transformers import AutoTokenizer

    from azllm.sft.template import prepare_tokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_base))
    prepare_tokenizer(tok, template="auto", name=str(tiny_base))
    pairs = [{k: p[k] for k in ("prompt", "chosen", "rejected")} for p in fixture_pairs(conversations, 16)]
    n = pair_tokens(tok, pairs, 128)
    whole = sum(len(tok.apply_chat_template(p["prompt"] + p[k], tokenize=True, return_dict=False))
                for p in pairs for k in ("chosen", "rejected")) / len(pairs)  # fmt: skip
    assert 0 < n <= whole  # each side cut at max_length
    spec = dataclasses.asdict(tiny_pref_spec(max_steps=5, batch_size=2, untimed_steps=1, report_to=()))
    res = compare_preference(
        base=str(tiny_base), pairs=pairs, pair_tokens=n, lora={"r": 4, "alpha": 8, "dropout": 0.0}, spec=spec,
        rounds=1, show_progress=False,
    )  # fmt: skip
    assert res["same_losses"] is True and len(res["rows"]) == 1
    assert res["ratio"] == res["recipe"] / res["bare"] and res["ratio_min"] == res["ratio_max"] == res["ratio"]
    assert set(res["peak_rss_gb"]) == {"bare", "recipe", "recipe_precomputed"}
    assert all(res[p] > 0 for p in ("bare", "recipe", "recipe_precomputed"))
