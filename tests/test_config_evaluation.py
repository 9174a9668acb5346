"""The evaluate section (azllm.config.evaluation): defaults that resolve on the shared data's layout, validation."""

import pytest

from azllm.config import ParamsError, load_params
from azllm.evaluation.tasks import LOCAL_TASKS


def test_defaults_name_only_shipped_tasks_with_data_entries():
    ev = load_params(None).evaluate
    assert set(ev.local) == set(LOCAL_TASKS) and set(ev.tasks) <= set(LOCAL_TASKS)
    assert ev.az_headline in ev.az_tasks and ev.en_headline in ev.en_tasks
    assert ev.local["mmlu_en"].num_fewshot == 5 and ev.probe.folds == 5


def test_bad_values_are_refused_with_the_key():
    with pytest.raises(ParamsError, match="evaluate.bootstrap_iters"):
        load_params(None, overrides={"evaluate": {"bootstrap_iters": 0}})
    with pytest.raises(ParamsError, match="unknown params key evaluate.local.sib200_az.paht"):
        load_params(None, overrides={"evaluate": {"local": {"sib200_az": {"paht": "x"}}}})
