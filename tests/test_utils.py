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


def test_replace_dir_never_leaves_the_folder_missing(tmp_path):
    """A reader polling the folder while it is replaced 200 times always finds it, each time complete (the old or
    the new content, never a half): the swap is one step."""
    import threading

    from azllm.utils import replace_dir

    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "a").write_text("0")
    (dst / "b").write_text("0")
    seen, stop = [], threading.Event()

    def read():  # the folder as one snapshot: both files through one open directory
        while not stop.is_set():
            try:
                fd = os.open(dst, os.O_RDONLY)
            except FileNotFoundError:
                seen.append(None)  # a moment without the folder
                continue
            try:
                texts = []
                for name in ("a", "b"):
                    f = os.open(name, os.O_RDONLY, dir_fd=fd)
                    texts.append(os.read(f, 9))
                    os.close(f)
                seen.append(texts[0] == texts[1])
            except FileNotFoundError:
                pass  # this snapshot was the old folder, already being deleted after the swap
            finally:
                os.close(fd)

    t = threading.Thread(target=read)
    t.start()
    for i in range(1, 201):
        new = tmp_path / f"new{i}"
        new.mkdir()
        (new / "a").write_text(str(i))
        (new / "b").write_text(str(i))
        replace_dir(new, dst)
        assert not new.exists()
    stop.set()
    t.join()
    assert seen and all(s is True for s in seen), (seen.count(None), seen.count(False))
    assert (dst / "a").read_text() == "200" and not [p for p in tmp_path.iterdir() if p.name != "out"]
