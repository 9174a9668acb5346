"""The shipped lm-eval task configs (azllm.evaluation.tasks): paths laid over the YAMLs, the few-shot pool, MMLU
per subject, the overlap check, stable hashes, chance levels, and lm-eval's own loader of the YAML folder."""

import pytest
from eval_helpers import EVAL, task

from azllm.evaluation.datasets import EvalDataError
from azllm.evaluation.tasks import LOCAL_TASKS, TASK_DIR, chance, config_hash, fewshot_overlap, local_task, task_rows


def test_every_shipped_yaml_is_an_lm_eval_task_of_the_same_name():
    from lm_eval.tasks import TaskManager

    names = set(TaskManager(include_path=str(TASK_DIR), include_defaults=False).all_tasks)
    assert set(LOCAL_TASKS) <= names


def test_the_pool_is_the_test_split_when_both_paths_are_the_same():
    (t,) = task("tumlu_az")
    assert t["fewshot_split"] == t["test_split"] == "test" and t["dataset_kwargs"]["fewshot_path"] is None
    o = fewshot_overlap(t)
    assert o["pool_is_test_split"] and o["test_items_in_pool"] == o["test_items"] == 8
    (s,) = task("sib200_az")
    o = fewshot_overlap(s)
    assert not o["pool_is_test_split"] and o["test_items_in_pool"] == 0 and o["pool"] == 42


def test_mmlu_is_one_task_per_subject_and_first_cuts_each():
    cfgs = task("mmlu_en", subset=None)
    assert [c["task"] for c in cfgs] == ["mmlu_en_marketing", "mmlu_en_nutrition"]
    assert all(len(task_rows(c)) == 8 and c["num_fewshot"] == 2 for c in cfgs)
    assert "about marketing" in cfgs[0]["description"]


def test_zero_shot_without_a_pool_and_few_shot_without_one_is_an_error():
    (t,) = local_task("sib200_az", path=str(EVAL / "data/az/eval/sib200/azj_Latn/dev.tsv"), fewshot_path="")
    assert "fewshot_split" not in t
    with pytest.raises(EvalDataError, match="num_fewshot=2 needs a few-shot pool"):
        local_task("sib200_az", path=str(EVAL / "data/az/eval/sib200/azj_Latn/dev.tsv"), fewshot_path="", num_fewshot=2)


def test_hashes_are_stable_and_follow_the_data():
    a, b = task("sib200_az")[0], task("sib200_az")[0]
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash(task("sib200_az", num_fewshot=3)[0])


def test_chance_levels():
    assert chance(task("sib200_az")[0]) == pytest.approx(1 / 7)
    assert chance(task("tumlu_az")[0]) == 0.25
    assert chance(task("tumlu_az_cot")[0]) is None  # generative, and no translation: no chance level


def test_a_translation_s_chance_is_the_source_copied_as_its_translation():
    """FLORES: corpus chrF++ (sacrebleu, word bigrams, as the task scores) of each test source taken as its own
    translation, on the test items ``first`` keeps; each direction has its own."""
    from sacrebleu.metrics import CHRF

    for name in ("flores_en_az", "flores_az_en"):
        (t,) = task(name)
        rows = task_rows(t)
        want = CHRF(word_order=2).corpus_score([r["source"] for r in rows], [[r["target"] for r in rows]]).score
        assert chance(t) == pytest.approx(want) and 0 < want < 100
    (short,) = task("flores_az_en", first=2)
    assert len(task_rows(short)) == 2 and chance(short) != chance(task("flores_az_en")[0])


def test_flores_needs_a_lang_placeholder(tmp_path):
    (f,) = local_task("flores_en_az", path=str(tmp_path / "flores.txt"), fewshot_path="")
    with pytest.raises(EvalDataError, match=r"needs \{lang\}"):
        task_rows(f)
