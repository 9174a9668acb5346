"""The sft params section: defaults, the sources map, refused keys, and the params files that use it."""

from pathlib import Path

import pytest

from azllm.config import ParamsError, load_params

REPO = Path(__file__).resolve().parent.parent


def test_defaults_and_the_notebook_list():
    cfg = load_params(None)
    assert "07_sft" in cfg.notebooks and cfg.sft.method == "lora" and cfg.sft.assistant_only_loss
    assert {n: s.origin for n, s in cfg.sft.sources.items()} == {"native": "native", "alpaca_mt": "translated"}
    assert "Yox" in cfg.sft.placeholders and cfg.sft.holdout_source == "native"


def test_a_source_map_replaces_the_default_and_unknown_keys_are_refused():
    cfg = load_params(None, overrides={"sft": {"sources": {"mine": {"path": "x.jsonl", "fields": {"output": "a"}}}}})
    assert list(cfg.sft.sources) == ["mine"] and cfg.sft.sources["mine"].fields == {"output": "a"}
    with pytest.raises(ParamsError, match="unknown params key sft.packingg"):
        load_params(None, overrides={"sft": {"packingg": True}})
    with pytest.raises(ParamsError, match="sft.packing_strategy"):
        load_params(None, overrides={"sft": {"packing_strategy": "greedy"}})


@pytest.mark.parametrize("name", ["sft_sagemaker", "gpu_sft", "sft_smollm2", "tiny"])
def test_the_sft_params_files_validate(name):
    cfg = load_params(REPO / "params" / f"{name}.yaml")
    assert cfg.sft.method in ("full", "lora", "qlora")
