"""The recipes package (azllm.recipes): load and setup, the first call of every notebook."""

import warnings

import pytest

from azllm import recipes
from azllm.config import ParamsError
from conftest import REPO


def test_load_is_the_typed_params_with_overrides():
    cfg = recipes.load(REPO / "params/tiny.yaml", overrides={"seed": 9})
    assert cfg.run_name == "tiny" and cfg.seed == 9
    with pytest.raises(ParamsError):
        recipes.load(None, overrides={"nope": 1})


def test_setup_routes_library_warnings_to_the_log(tmp_path, monkeypatch):
    log = tmp_path / "run.log"
    monkeypatch.setenv("AZLLM_LOG", str(log))
    recipes.setup(REPO / "params/tiny.yaml")
    warnings.warn("a library warning", stacklevel=1)
    assert "a library warning" in log.read_text()
