"""The sweep file (azllm.config.sweep): its keys checked, every shipped sweep file valid and naming a params file
that exists."""

import pytest
from pydantic import ValidationError

from azllm.config.sweep import SweepConfig
from azllm.recipes.sweep import read_sweep
from conftest import REPO


def test_a_sweep_names_its_params_and_at_least_one_variant():
    s = SweepConfig.model_validate({"params": "p.yaml", "variants": {"a": {"lr": 1e-4}}})
    assert s.stage == "preference" and s.variants == {"a": {"lr": 1e-4}}
    with pytest.raises(ValidationError):
        SweepConfig.model_validate({"params": "p.yaml", "variants": {}})
    with pytest.raises(ValidationError):
        SweepConfig.model_validate({"params": "p.yaml", "variants": {"a": {}}, "stages": "sft"})  # a misspelt key
    with pytest.raises(ValidationError):
        SweepConfig.model_validate({"params": "p.yaml", "variants": {"a": {}}, "stage": "sft"})  # not a sweep stage


@pytest.mark.parametrize("path", sorted((REPO / "params" / "sweeps").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_sweep_file_is_valid_and_its_params_exist(path):
    from azllm.config import load_params

    s = read_sweep(path)
    cfg = load_params(REPO / s.params)
    for settings in s.variants.values():  # each variant's settings are keys of the stage's section
        load_params(REPO / s.params, overrides={s.stage: settings})
    assert cfg.sft.verdict_size > 0  # a shipped sweep chooses apart from a verdict split
