"""The SageMaker launch params (azllm.config.launch)."""

from config_helpers import check_sections

from azllm.config import launch, load_params
from conftest import REPO


def test_sections_are_documented_and_valid():
    check_sections(launch)


def test_the_shipped_launch_params_forward_the_token_and_run_on_spot():
    cfg = load_params(REPO / "params/sagemaker.yaml")
    assert "HF_TOKEN" in cfg.launch.forward_env and cfg.launch.spot
    assert cfg.launch.max_wait_hours >= cfg.launch.max_run_hours
