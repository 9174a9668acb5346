"""The model, training, benchmark and adaptation params (azllm.config.training), and how the train section maps
onto the library's TrainSpec: every field is either a TrainSpec field (and so part of a run's key unless marked) or
named here as read by the recipe itself, so a new field cannot silently change nothing or every key."""

from dataclasses import fields

from config_helpers import check_sections

from azllm.config import load_params, training
from azllm.train import TrainSpec

READ_BY_THE_RECIPE = {
    "method": "the ModelSpec's method",
    "dev_sets": "the eval files (and the key's eval_sets)",
    "compare": "notebook 03",
    "compare_steps": "notebook 03",
    "compare_lr": "notebook 03",
    "generate": "notebook 03",
}


def test_sections_are_documented_and_valid():
    check_sections(training)


def test_every_train_field_reaches_the_spec_or_is_read_by_the_recipe():
    spec = {f.name for f in fields(TrainSpec)}
    config = set(training.TrainConfig.model_fields)
    assert config - spec == set(READ_BY_THE_RECIPE), config - spec
    assert spec - config == {"seed"}  # the run's seed, a top-level param


def test_the_spec_of_the_params():
    from azllm.recipes.train import train_spec

    cfg = load_params(None, overrides={"seed": 5, "train": {"lr": 0.01, "rows_only_steps": 3, "method": "lora"}})
    s = train_spec(cfg)
    assert (s.lr, s.seed, s.rows_only_steps, s.betas) == (0.01, 5, 3, (0.9, 0.95))
    assert train_spec(cfg, method="full").rows_only_steps == 0  # the two-stage schedule is for adapters
