"""azllm.recipes.stages: a finished stage's output found by its marker, for the same params only, while the output
is complete; preference tuning takes this run's SFT export from it without running SFT."""

import pytest

from azllm.config import load_params
from azllm.recipes import prefer, stages


def _cfg(tmp_path, monkeypatch, **over):
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    return load_params(None, overrides={"run_name": "stages", **over})


def _model_folder(where):
    where.mkdir(parents=True)
    (where / "config.json").write_text("{}")
    return where


def test_a_marked_output_is_found_for_the_same_params_while_complete(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path, monkeypatch)
    assert stages.finished(cfg, "sft") is None
    folder = _model_folder(tmp_path / "export")
    path = stages.mark(cfg, "sft", folder, results="r.json")
    assert path.name == "sft.json" and path.parent.name == "stages"
    got = stages.finished(cfg, "sft")
    assert got["artifact"] == str(folder.resolve()) and got["results"] == "r.json"
    assert stages.finished(_cfg(tmp_path, monkeypatch, seed=7), "sft") is None  # other params: not theirs
    (folder / "config.json").unlink()
    assert stages.finished(cfg, "sft") is None  # incomplete
    with pytest.raises(ValueError, match="unknown stage 'sfft'"):
        stages.finished(cfg, "sfft")


def test_preference_tuning_takes_the_marked_sft_export_without_running_sft(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path, monkeypatch)
    folder = _model_folder(tmp_path / "sft-export")
    stages.mark(cfg, "sft", folder)

    def no(*a, **k):
        raise AssertionError("SFT ran although its export was marked")

    monkeypatch.setattr("azllm.recipes.sft.sft_command", no)
    said = []
    assert prefer.preference_base(cfg, show=said.append) == str(folder.resolve())
    assert "found" in said[0]
    (folder / "config.json").unlink()
    with pytest.raises(AssertionError, match="SFT ran"):
        prefer.preference_base(cfg, show=said.append)
