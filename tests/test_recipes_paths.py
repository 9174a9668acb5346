"""Where a run's things live (azllm.recipes.paths.Paths): one object, every folder under the run's artifacts."""

import json
from pathlib import Path

from azllm.config import load_params
from azllm.recipes.paths import Paths


def test_every_folder_is_under_the_run_artifacts(tmp_path, monkeypatch):
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path))
    p = Paths(load_params(None, overrides={"run_name": "r"}))
    assert p.artifacts == tmp_path / "r"
    for f in (
        p.corpus_root,
        p.corpus("k"),
        p.tokenizer,
        p.tokenizers,
        p.recipe_step(1),
        p.tokens,
        p.dev_tokens("x"),
        p.encoder_bench,
        p.run("lora", "k"),
        p.bench,
        p.methods_bench,
        p.overhead_bench,
        p.adapt,
        p.launch,
    ):
        assert f.is_relative_to(p.artifacts), f
    assert p.report("reports") == Path("reports") / "r"


def test_tokens_dir_and_data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("AZLLM_DATA_ROOT", str(tmp_path))
    p = Paths(load_params(None, overrides={"tokens": {"dir": str(tmp_path / "tok")}}))
    assert p.tokens == tmp_path / "tok" and p.data_root == tmp_path.resolve()
    (tmp_path / "a.txt").write_text("x")
    assert p.existing("a.txt") == tmp_path / "a.txt" and p.existing("b.txt") is None
    assert p.under_root("/abs/x") == Path("/abs/x")
    monkeypatch.setenv("AZLLM_DATA_ROOT", "")
    assert Paths(load_params(None)).data_root is None and Paths(load_params(None)).under_root("x") is None


def test_without_a_setting_the_data_root_is_shared_beside_the_repository(tmp_path, monkeypatch):
    """Unset ``$AZLLM_DATA_ROOT`` and no ``data.root``: ``shared/`` beside the repository when it holds ``data/`` (the
    choice ``make`` makes, now made by every command and by a notebook in JupyterLab), else none."""
    from azllm.recipes import paths

    repo = tmp_path / "azllm"
    repo.mkdir()
    assert paths.default_data_root(repo) is None
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert paths.default_data_root(repo) == tmp_path / "shared"
    monkeypatch.delenv("AZLLM_DATA_ROOT", raising=False)
    monkeypatch.setattr(paths, "REPO_ROOT", repo)
    monkeypatch.setattr(paths.default_data_root, "__defaults__", (repo,))
    assert Paths(load_params(None)).data_root == (tmp_path / "shared").resolve()
    monkeypatch.setenv("AZLLM_DATA_ROOT", "")
    assert Paths(load_params(None)).data_root is None


def test_one_azllm_run_builds_each_runs_paths_once_per_process(adapt_report):
    """Notebooks 05, 06 and 08 as ``azllm run`` runs them: every process (a kernel per notebook, and what they start)
    builds the Paths of one run (its name, token folder and data root) once, and asks Paths.of after that."""
    _, _, art = adapt_report
    rows = [tuple(json.loads(line)) for line in (art.parent.parent / "paths.log").read_text().splitlines()]
    assert len({pid for pid, *_ in rows}) >= 3 and any(run == "tiny" for _, run, *_ in rows)
    again = sorted({r for r in rows if rows.count(r) > 1})
    assert not again, f"built more than once in one process: {again}"
