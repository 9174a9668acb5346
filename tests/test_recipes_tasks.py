"""The run's evaluation tasks (azllm.recipes.tasks): paths under the data root, registry names, the texts the corpus
stage decontaminates against, the probe's rows, and data that is not there."""

import warnings

import pytest
from eval_helpers import REPO

from azllm.config import load_params
from azllm.evaluation.datasets import EvalDataError
from azllm.evaluation.harness import UnknownTaskError
from azllm.recipes.tasks import decontamination_sets, hub_tasks, local_configs, probe_rows
from conftest import FIXTURES


@pytest.fixture
def cfg(monkeypatch):
    monkeypatch.setenv("AZLLM_DATA_ROOT", str(FIXTURES))
    return load_params(REPO / "params/tiny.yaml")


def test_local_configs_resolve_under_the_data_root(cfg):
    names = [c["task"] for c in local_configs(cfg)]
    assert names == ["sib200_az", "sib200_en", "tumlu_az", "mmlu_en_marketing", "flores_en_az", "flores_az_en"]
    assert local_configs(cfg)[0]["dataset_kwargs"]["path"] == str(FIXTURES / "data/az/eval/sib200/azj_Latn/dev.tsv")


def test_registry_names_pass_and_typos_fail(cfg, lm_eval_registry):
    c = cfg.model_copy(update={"evaluate": cfg.evaluate.model_copy(update={"tasks": ["sib200_az", "arc_easy"]})})
    assert hub_tasks(c) == ["arc_easy"]
    c = cfg.model_copy(update={"evaluate": cfg.evaluate.model_copy(update={"tasks": ["arc_eazy"]})})
    with pytest.raises(UnknownTaskError, match="close: arc_easy"):
        hub_tasks(c)


def test_decontamination_sets_hold_every_named_task(cfg):
    sets = decontamination_sets(cfg)
    assert set(sets) == {
        "task:sib200_az",
        "task:sib200_en",
        "task:tumlu_az",
        "task:mmlu",
        "task:flores_en_az",
        "task:flores_az_en",
    }
    assert len(sets["task:sib200_az"]) == 56  # 14 test + 42 few-shot sentences
    off = cfg.model_copy(update={"evaluate": cfg.evaluate.model_copy(update={"decontaminate": False})})
    assert decontamination_sets(off) == {}


def test_the_corpus_stage_removes_a_planted_eval_task_line(cfg, tmp_path):
    """A training document that holds a TUMLU question is removed by the corpus stage, named by its task."""
    from azllm.evaluation.tasks import task_rows
    from azllm.recipes.corpus import run_corpus
    from azllm.recipes.tasks import local_configs as lc

    (t,) = lc(cfg, ["tumlu_az"])
    q = next(r["question"] for r in task_rows(t) if len(r["question"].split()) >= 8)
    train = tmp_path / "data/az/train"
    train.mkdir(parents=True)
    (train / "a.txt").write_text(
        "Bu gün hava çox gözəl idi və biz parka getdik, orada çoxlu insan var idi.\n"
        f"Məktəbdə müəllim soruşdu: {q} Hamı düşündü.\n",
        encoding="utf-8",
    )
    c = load_params(
        REPO / "params/tiny.yaml",
        overrides={
            "run_name": "plant",
            "data": {"train": {"path": str(train / "*.txt")}},
            "corpus": {"languages": ["az"]},
        },
    )
    import os

    os.environ["AZLLM_ARTIFACTS"] = str(tmp_path / "art")
    try:
        m = run_corpus(c)
    finally:
        os.environ.pop("AZLLM_ARTIFACTS")
    assert m["counts"]["by_source"]["total"]["decontamination_docs"] == 1


def test_probe_rows_and_missing_data(cfg, monkeypatch):
    train, test = probe_rows(cfg, "sib200_az")
    assert len(train) == 42 and len(test) == 14
    with pytest.raises(ValueError, match="not a SIB-200 task"):
        probe_rows(cfg, "tumlu_az")
    monkeypatch.setenv("AZLLM_DATA_ROOT", str(FIXTURES / "nowhere"))
    with pytest.raises(EvalDataError, match="no such file or folder"):
        local_configs(cfg)
    monkeypatch.setenv("AZLLM_DATA_ROOT", "")  # set but empty: no data root
    c = load_params(REPO / "params/tiny.yaml")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert local_configs(c) == []
    assert any("left out: no local data" in str(x.message) for x in w)


def test_the_shipped_sample_leaves_out_what_it_lacks(monkeypatch):
    from azllm.recipes.sources import SAMPLE_ROOT

    monkeypatch.setenv("AZLLM_DATA_ROOT", str(SAMPLE_ROOT))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        names = [c["task"] for c in local_configs(load_params(None))]
    assert names == ["sib200_az", "sib200_en", "flores_en_az", "flores_az_en"]
    assert any("tumlu_az left out" in str(x.message) for x in w) and any(
        "mmlu_en left out" in str(x.message) for x in w
    )


def test_a_zero_shot_task_with_no_pool_in_the_params_needs_none(monkeypatch):
    """``evaluate.local.<task>`` without ``fewshot_path`` is zero-shot: no pool, never the YAML's relative pool path
    (which pointed at a file that is not under the data root, or dropped the task with no data root)."""
    monkeypatch.setenv("AZLLM_DATA_ROOT", str(FIXTURES))
    c = load_params(
        None,
        overrides={
            "evaluate": {
                "tasks": ["sib200_az"],
                "local": {"sib200_az": {"path": "data/az/eval/sib200/azj_Latn/dev.tsv"}},
            }
        },
    )
    (t,) = local_configs(c)
    assert t["dataset_kwargs"]["fewshot_path"] is None and "fewshot_split" not in t
    assert probe_rows(c, "sib200_az")[0] == []  # no pool: the probe's folds run over the test split alone
    few = load_params(
        None,
        overrides={
            "evaluate": {
                "tasks": ["sib200_az"],
                "local": {"sib200_az": {"path": "data/az/eval/sib200/azj_Latn/dev.tsv", "num_fewshot": 3}},
            }
        },
    )
    with pytest.raises(EvalDataError, match="needs a few-shot pool"):
        local_configs(few)
