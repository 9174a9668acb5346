"""Preference tuning's recipe (azllm.recipes.prefer) through ``azllm prefer``: pairs built from the SFT data on a
tiny base, DPO with LoRA, the held-out judgement with its standard errors, the merged export, a cached rerun."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sft_helpers import prefer_params, tiny_base  # noqa: F401  (fixtures)

from azllm.cli import main
from azllm.recipes import prefer
from conftest import FIXTURES

JUDGED = {"preference accuracy", "chrF++", "loop rate", "empty answers", "English bits per byte", "mean answer words"}
"""The measures of a preference run's judgement (azllm.recipes.prefer.judgement_rows)."""


def _params(tmp_path, base) -> "Path":  # noqa: F821
    return prefer_params(tmp_path, base)


def test_azllm_prefer_builds_pairs_trains_judges_and_exports(tiny_base, tmp_path, monkeypatch, capsys):
    from azllm.recipes.paths import Paths

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    params, built, init = _params(tmp_path, tiny_base), [], Paths.__init__
    monkeypatch.setattr(Paths, "__init__", lambda self, cfg: built.append(cfg.run_name) or init(self, cfg))
    assert main(["prefer", str(params)]) == 0
    assert built == ["prefer"]  # one Paths for the whole run: every recipe asks Paths.of, none rebuilds it
    out = capsys.readouterr().out
    record = json.loads(open(out.strip().splitlines()[-1]).read())
    assert record["method"] == "dpo" and record["run"]["steps"] == 4
    assert record["counts"]["on_policy"]["built"] > 0 and abs(sum(record["shares"].values()) - 1) < 1e-9
    acc = record["preference_accuracy"]
    assert acc["n"] == record["counts"]["held_out"]["built"] > 0 and acc["chance"] == 0.5 and "accuracy_se" in acc
    chrf = record["chrf"]
    assert chrf["n"] > 0 and chrf["delta_se"] >= 0 and {"before", "after"} <= set(record["mean_answer_words"])
    assert len(record["samples"]) == 3 and all(s["sft"] is not None for s in record["samples"])
    loops = record["loops"]
    assert loops["n"] == chrf["n"] and 0 <= loops["before"] <= 1 and 0 <= loops["after"] <= 1
    empty = record["empty"]
    assert empty["n"] == chrf["n"] and 0 <= empty["before"] <= 1 and 0 <= empty["after"] <= 1
    english = record["english"]  # the guard: the held-out English text, both models on the same documents
    assert (
        english["n"] > 1
        and english["before"] > 0
        and english["delta"] == pytest.approx(english["after"] - english["before"])
    )
    rows = {r["measure"].split(" (")[0]: r for r in prefer.judgement_rows(record)}
    assert set(rows) == JUDGED
    assert rows["English bits per byte"]["measure"].endswith(
        f"({english['n']} held-out English documents; lower is better)"
    )
    assert rows["preference accuracy"]["mde"] == pytest.approx(2.8016 * rows["preference accuracy"]["delta_se"])
    assert rows["loop rate"]["delta"] == pytest.approx(loops["after"] - loops["before"])
    assert rows["preference accuracy"]["n"] == acc["n"]
    assert rows["chrF++"]["n"] == rows["empty answers"]["n"] == chrf["n"]
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(record["export"])  # a plain folder: loads without peft
    assert main(["prefer", str(params)]) == 0  # the same run again: returned as it is
    assert "prefer.json" in capsys.readouterr().out


def test_with_a_verdict_split_judged_pairs_come_from_it_and_the_loops_eval_pairs_from_the_selection(
    tiny_base, tmp_path, monkeypatch
):
    """``sft.verdict_size``: the held-out pairs (accuracy, answers) are built on the verdict conversations, the
    training loop's eval pairs on the held-out (selection) ones, and training pairs overlap neither. The SFT model's
    answers come from a recording engine (what is answered is the question here, not how)."""
    from transformers import AutoTokenizer

    from azllm import engine
    from azllm.config import load_params
    from azllm.recipes import conversations
    from azllm.sft.template import prepare_tokenizer

    class Fixed:
        def complete(self, prompts, decoding):
            return [{"text": "bilmirəm", "tokens": 1, "stopped": True, "words": 1, "loop": False} for _ in prompts]

    monkeypatch.setattr(engine, "torch_engine", lambda model, tok, **kw: Fixed())
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    raw = yaml.safe_load(_params(tmp_path, tiny_base).read_text())
    raw["sft"]["verdict_size"] = 5
    cfg = load_params(None, overrides=raw)
    tok = AutoTokenizer.from_pretrained(str(tiny_base))
    template = prepare_tokenizer(tok)
    data = prefer.preference_data(cfg, None, tok, template)
    convs = conversations.sft_data(cfg, tok)
    verdict, selection = {c["id"] for c in convs["verdict"]}, {c["id"] for c in convs["held_out"]}

    def ids(pairs, built_as):
        assert all(p["id"].startswith(f"{built_as}/") for p in pairs)
        return {p["id"].split("/", 1)[1] for p in pairs}

    assert ids(data["held_out"], "held_out") <= verdict and len(data["held_out"]) == min(4, len(verdict)) > 0
    assert ids(data["selection"], "selection") <= selection and len(data["selection"]) == min(4, len(selection)) > 0
    assert data["counts"]["selection"]["built"] == len(data["selection"]) and data["sft"]["verdict"] == convs["verdict"]
    assert not ids(data["train"], "on_policy") & (verdict | selection)


def test_notebook_09_answers_does_preference_tuning_help(tiny_base, tmp_path, monkeypatch):
    """The page: the pairs step by step, the curves, the held-out judgement (accuracy against chance with a binomial
    SE, chrF++ paired against the SFT model, answer length), the answers, the tasks paired, and the index's row."""
    from conftest import REPO, run_notebooks

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    raw = yaml.safe_load(_params(tmp_path, tiny_base).read_text())
    raw["evaluate"] = yaml.safe_load((REPO / "params" / "tiny.yaml").read_text())["evaluate"]  # the fixture's cuts
    raw["adapt"] = {"base": str(tiny_base)}  # the original base the cycle is judged against (here the SFT base too)
    params = tmp_path / "p09.yaml"
    params.write_text(yaml.safe_dump(raw))
    run_dir, ok = run_notebooks(params, reports_dir=tmp_path / "reports", notebooks=["09_preference"])
    assert ok
    doc = json.loads((run_dir / "metrics.json").read_text())
    m = doc["metrics"]["preference"]
    steps = [r["step"] for r in m["pairs"]]
    assert steps[0].startswith("user pairs") and steps[-1].startswith("held out")
    trained = [r for r in m["pairs"] if r["step"].startswith("trained on")]
    assert trained and abs(sum(r["share"] for r in trained) - 1) < 1e-9
    judged = {r["measure"].split(" (")[0]: r for r in m["judgement"]}
    assert set(judged) == JUDGED
    assert m["english"]["n"] == judged["English bits per byte"]["n"] > 1  # the page keeps the guard's parts
    acc = judged["preference accuracy"]
    assert acc["before"] == 0.5 and abs(acc["delta_se"] - (0.25 / m["preference_accuracy"]["n"]) ** 0.5) < 1e-12
    assert {r["task"] for r in m["tasks_before_after"]} >= {"sib200_az", "sib200_en"}
    assert doc["artifacts"]["preference_export"] == m["export"]
    # the cycle's last model against the original base: the same answers paired, the same tasks
    a = m["against_original"]
    assert [r["model"] for r in a["chain"]] == ["original base", "adapted + SFT", "adapted + SFT + preference"]
    first, same, last = a["chain"]
    assert same["delta"] == 0 and same["delta_previous"] == 0  # the SFT base here is the original itself
    assert last["previous"] == "adapted + SFT" and last["delta_previous"] == pytest.approx(last["delta"])
    native, *tasks = a["rows"]
    got = (native["before"], native["after"], native["delta"])
    assert got == pytest.approx((first["chrf"], last["chrf"], last["delta"]))
    assert native["chance"] is not None and native["n"] == last["n"] > 0
    by_task = {r["task"]: r for r in m["tasks_before_after"]}
    assert {r["task"] for r in tasks} == set(by_task)
    assert all(r["after"] == by_task[r["task"]]["after"] for r in tasks)  # the export's scores, read back
    html = (run_dir / "09_preference.html").read_text()
    assert "Tasks before and after" in html and "<img" in html and "against the original base" in html
    index = (run_dir / "index.html").read_text()
    assert "Does preference tuning help" in index and "09_preference.html" in index


@pytest.mark.slow  # ~60 s: the staged entry in a fresh process
def test_azllm_prefer_runs_as_the_staged_job_under_a_simulated_sagemaker_job(tiny_base, tmp_path):
    """What `azllm launch params/dpo_sagemaker.yaml` starts: the staged entry runs `azllm prefer params.yaml` with
    the chat data as the data channel; the run's folder in the synced checkpoint folder, the merged export in
    SM_MODEL_DIR, prefer.json in SM_OUTPUT_DATA_DIR; a restarted job finds the finished run."""
    from azllm.recipes import launch as L

    raw = yaml.safe_load(_params(tmp_path, tiny_base).read_text())
    raw["data"] = {"eval": raw["data"]["eval"]}  # the data root comes from the job's data channel
    raw["launch"] = {"command": "prefer"}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(raw))
    src = L.stage_source(tmp_path / "p.yaml", tmp_path / "code", command="prefer")
    env = {
        **os.environ,
        "SM_MODEL_DIR": str(tmp_path / "model"),
        "SM_OUTPUT_DATA_DIR": str(tmp_path / "output"),
        "SM_CHANNEL_DATA": str(FIXTURES),
        "AZLLM_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "AZLLM_ARTIFACTS": str(tmp_path / "art"),
        "PYTHONPATH": str(src),
    }
    env.pop("AZLLM_DATA_ROOT", None)
    cmd = [sys.executable, "azllm_train.py", "--params", "params.yaml", "--run_name", "sm"]
    for _ in range(2):  # the second start is a restarted job: it returns the finished run
        proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "output" / "prefer.json").read_text())
    assert record["run"]["steps"] == 4 and record["export"] == str(tmp_path / "model")
    assert Path(record["output_dir"]).parent == tmp_path / "checkpoints"
    assert {"model.safetensors", "chat_template.jinja"} <= {f.name for f in (tmp_path / "model").iterdir()}
