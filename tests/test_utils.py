import json
import os

import pytest

from azllm import utils


def test_atomic_write_replaces_whole_file_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "sub" / "m.json"
    utils.atomic_write_json(p, {"a": 1})
    utils.atomic_write_json(p, {"b": [1, 2]})
    assert json.loads(p.read_text()) == {"b": [1, 2]}
    assert [f.name for f in p.parent.iterdir()] == ["m.json"]


def test_atomic_write_keeps_old_file_when_writing_fails(tmp_path, monkeypatch):
    p = tmp_path / "m.txt"
    utils.atomic_write_text(p, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        utils.atomic_write_text(p, "new")
    assert p.read_text() == "old" and [f.name for f in tmp_path.iterdir()] == ["m.txt"]


def test_metadata_helpers():
    info = utils.machine_info()
    assert info["cpu_count"] >= 1 and "cuda" in info
    v = utils.package_versions()
    assert v["torch"].startswith("2.") and v["azllm"] == "0.1.0"
    commit = utils.git_commit()
    assert commit is None or len(commit.split("-")[0]) == 40
    assert utils.peak_rss_mb() > 10


def test_seed_everything_is_reproducible():
    import torch

    utils.seed_everything(3)
    a = torch.rand(3)
    utils.seed_everything(3)
    assert torch.equal(a, torch.rand(3))
