"""Preference tuning's recipe (azllm.recipes.prefer) through ``azllm prefer``: pairs built from the SFT data on a
tiny base, DPO with LoRA, the held-out judgement with its standard errors, the merged export, a cached rerun."""

import json

import yaml
from sft_helpers import SFT_DIR, tiny_base  # noqa: F401  (fixtures)

from azllm.cli import main
from conftest import FIXTURES


def _params(tmp_path, base) -> "Path":  # noqa: F821
    params = {
        "run_name": "prefer",
        "data": {"root": str(FIXTURES), "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt"}}},
        "sft": {
            "sources": {
                "native": {"path": str(SFT_DIR / "native_train.jsonl"), "origin": "native"},
                "alpaca_mt": {"path": str(SFT_DIR / "alpaca_az_mt.jsonl"), "origin": "translated"},
            },
            "holdout_size": 4,
            "max_new_tokens": 12,
            "max_length": 256,
        },
        "model": {"lora": {"r": 4, "alpha": 8}},
        "preference": {
            "base": str(base),
            "build_prompts": 8,
            "held_out_pairs": 4,
            "max_steps": 4,
            "eval_steps": 2,
            "batch_size": 2,
            "max_length": 256,
        },
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def test_azllm_prefer_builds_pairs_trains_judges_and_exports(tiny_base, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    params = _params(tmp_path, tiny_base)
    assert main(["prefer", str(params)]) == 0
    out = capsys.readouterr().out
    record = json.loads(open(out.strip().splitlines()[-1]).read())
    assert record["method"] == "dpo" and record["run"]["steps"] == 4
    assert record["counts"]["on_policy"]["built"] > 0 and abs(sum(record["shares"].values()) - 1) < 1e-9
    acc = record["preference_accuracy"]
    assert acc["n"] == record["counts"]["held_out"]["built"] > 0 and acc["chance"] == 0.5 and "accuracy_se" in acc
    chrf = record["chrf++"]
    assert chrf["paired"] and chrf["se"] >= 0 and {"before", "after"} <= set(record["mean_answer_words"])
    assert len(record["samples"]) == 3 and all(s["sft"] is not None for s in record["samples"])
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(record["export"])  # a plain folder: loads without peft
    assert main(["prefer", str(params)]) == 0  # the same run again: returned as it is
    assert "prefer.json" in capsys.readouterr().out
