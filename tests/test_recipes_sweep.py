"""``azllm sweep`` (azllm.recipes.sweep): each variant trained (or read back) and judged on the selection split, never
on the verdict's; the record holds every variant's judgement and the rule's choice, and azllm results renders it."""

import json

import pytest
import yaml
from sft_helpers import prefer_params, tiny_base  # noqa: F401  (fixture)

from azllm.cli import main


def _params(tmp_path, base):
    return prefer_params(
        tmp_path,
        base,
        sft={"verdict_size": 4, "max_new_tokens": 8},
        preference={"build_prompts": 6, "max_steps": 2},
    )


@pytest.mark.slow  # two tiny DPO runs and their judgements
def test_a_sweep_judges_each_variant_on_the_selection_split_and_records_the_choice(
    tiny_base, tmp_path, monkeypatch, capsys
):
    from azllm.recipes import conversations, load, prefer, sft
    from azllm.record import read_record
    from azllm.results import markdown

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    params = _params(tmp_path, tiny_base)
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        yaml.safe_dump({"params": str(params), "variants": {"a": {"lr": 1e-4}, "b": {"lr": 1e-3, "sft_weight": 1.0}}})
    )
    assert main(["sweep", str(sweep), "--record", str(tmp_path / "rec.json")]) == 0
    chosen = capsys.readouterr().out.strip().splitlines()[-1]
    rec = json.loads((tmp_path / "rec.json").read_text())
    assert [v["name"] for v in rec["variants"]] == ["a", "b"] and rec["sweep"] == "preference"
    assert chosen == (rec["chosen"] or "none: no variant met the rule")
    assert rec["chosen"] == (prefer.chosen_setting(rec["variants"]) or {}).get("name")
    cfg = load(params)
    tok, _ = sft.sft_tokenizer(cfg, str(tiny_base))
    data = conversations.sft_data(cfg, tok)
    n_selection = min(4, len(data["held_out"]))
    for v in rec["variants"]:
        acc, chrf = v["judgement"][0], v["judgement"][1]
        assert acc["n"] == n_selection and chrf["n"] == len(data["held_out"]) != 0  # the selection split's
        english = next(r for r in v["judgement"] if r["measure"].startswith("English bits per byte"))
        assert english["verdict"] in ("gain", "loss", "within noise") and english["n"] > 1
    assert rec["variants"][1]["settings"] == {"lr": 1e-3, "sft_weight": 1.0} and rec["run"]["git_commit"]
    assert "selection split" in rec["run"]["judged_on"] and "English: " in rec["run"]["judged_on"]
    assert "Chosen: **" in markdown(read_record(tmp_path / "rec.json"))
    # the study's own run (judged on the verdict) never reads a sweep variant back: the keys differ
    verdict_run = prefer.prefer_command(load(params, {"preference": {"lr": 1e-4}}), show=lambda *a: None)
    assert verdict_run["key"] != rec["variants"][0]["key"]
    assert verdict_run["preference_accuracy"]["n"] == min(4, len(data["verdict"]))
