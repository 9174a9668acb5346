"""The runner: params -> papermill -> HTML + metrics.json + index.html, on the real notebook and tiny params."""

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_notebook

from azllm.report import run_report
from conftest import FIXTURES, run_notebooks, shared_root

REPO = Path(__file__).resolve().parent.parent


def _tiny_params(tmp_path: Path, data: str = "fixture", **sections) -> Path:
    """params/tiny.yaml on the fixture corpus (without the baselines, which live in shared/tokenizers) or on the
    full shared folder (with them), ``sections`` laid over it, written to ``tmp_path``."""
    params = yaml.safe_load((REPO / "params/tiny.yaml").read_text())
    for name, values in sections.items():
        params[name] = {**params.get(name, {}), **values}
    if data == "fixture":
        params.update(baselines={}, data={**params["data"], "root": str(FIXTURES)})
    else:
        params["data"]["root"] = str(shared_root())
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(params, allow_unicode=True))
    return tmp_path / "tiny.yaml"


@pytest.mark.slow  # 14-23 s: one notebook run per test run
def test_tokenizer_notebook_end_to_end(tmp_path, monkeypatch):
    """params/tiny.yaml on the full shared folder (with the baselines) where it is beside the repository, else on the
    fixture corpus (without them, which live in shared/tokenizers): one run, on the most complete data there is."""
    data = "shared" if shared_root() is not None else "fixture"
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "artifacts"))
    run_dir, ok = run_notebooks(
        _tiny_params(tmp_path, data), reports_dir=tmp_path / "reports", notebooks=["01_tokenizers"]
    )
    assert ok
    for f in ("index.html", "01_tokenizers.html", "01_tokenizers.ipynb", "metrics.json", "params.yaml"):
        assert (run_dir / f).is_file(), f
    m = json.loads((run_dir / "metrics.json").read_text())
    run = m["run"]
    assert len(run["params_hash"]) == 16 and run["seed"] == 1234 and run["params"]["run_name"] == "tiny"
    assert run["packages"]["torch"] and run["packages"]["sentencepiece"] and run["machine"]["cpu_count"]
    assert "git_commit" in run
    assert all(len(h) == 64 for h in m["inputs"]["train"]["sha256"].values())
    tk = m["metrics"]["tokenizers"]
    assert tk["best"] in {r["tokenizer"] for r in tk["table"]}
    assert 1.0 < tk["best_fertility"] < 5.0
    assert all(c["roundtrip_failures"] == 0 for c in tk["checks"].values())
    assert tk["checks"]["flores (as found)"]["normalized_away"] > 0  # the raw lines carry what normalize changes
    assert all(c["normalized_away"] == 0 for k, c in tk["checks"].items() if k in tk["eval_sets"])
    assert [r["sample_lines"] for r in tk["sample_leakage"]] == [0] * len(tk["sample_leakage"])
    assert Path(m["artifacts"]["tokenizer"]).joinpath("tokenizer.json").is_file()
    assert {r["tokenizer"] for r in tk["table"]} >= {"unigram-1k", "bpe-2k-affix"} | (
        {"gpt2", "xlm-r"} if data == "shared" else set()
    )
    html = (run_dir / "01_tokenizers.html").read_text()
    assert "data:image/png;base64" in html  # the plots are in the page
    assert "recipes.setup(" not in html  # code hidden by default
    assert "training tokenizers" in (run_dir / "run.log").read_text()
    assert "01_tokenizers.html" in (run_dir / "index.html").read_text()
    assert ">nan<" not in html.lower()  # a value that does not apply (xwmt has no parallel side) shows as "—"
    index = (run_dir / "index.html").read_text()
    assert index.index("The answers") < index.index("Pages") and "Tokens per word" in index
    assert f"azllm publish {run_dir} --repo OWNER/NAME" in index  # the command that publishes the run


@pytest.mark.slow  # 13-21 s on 2 cores
def test_corpus_notebook_page_holds_no_datatrove_log(tmp_path, monkeypatch):
    """Notebook 00 runs the corpus stage on datatrove's worker processes (forkserver, here in a Jupyter kernel):
    their loguru lines (pipeline banners, per-task stats) go to run.log and the terminal, not into the page."""
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "artifacts"))
    params = _tiny_params(tmp_path, corpus={"tasks": 2, "workers": 2})
    run_dir, ok = run_notebooks(params, reports_dir=tmp_path / "reports", notebooks=["00_corpus"])
    m = json.loads((run_dir / "metrics.json").read_text())
    assert ok, m["notebooks"]
    assert m["metrics"]["corpus"]["performance"]["workers"] == 2  # worker processes ran, in the kernel
    log = (run_dir / "run.log").read_text()
    assert "Launching pipeline for rank=" in log and "2/2 tasks completed." in log  # the latter: a worker's line
    assert "Launching pipeline" not in (run_dir / "00_corpus.html").read_text()


def test_failed_cell_exits_nonzero_and_keeps_partial_report(tmp_path):
    nb_dir = tmp_path / "nbs"
    nb_dir.mkdir()
    nb = new_notebook()
    nb.cells = [
        new_code_cell('params_file = ""\nout_dir = ""', metadata={"tags": ["parameters"]}),
        new_code_cell(
            "from azllm import report\nreport.record(out_dir, 'demo', {'before': 1})\nprint('first part done')"
        ),
        new_code_cell("raise ValueError('loss is NaN')"),
        new_code_cell("print('never')"),
    ]
    nbformat.write(nb, str(nb_dir / "boom.ipynb"))
    nbformat.write(new_notebook(cells=[new_code_cell("print(1)")]), str(nb_dir / "after.ipynb"))
    params = tmp_path / "p.yaml"
    params.write_text("run_name: boom\nnotebooks: [boom, after]\n")
    run_dir, ok = run_report(params, reports_dir=tmp_path / "reports", notebooks_dir=nb_dir)
    assert not ok
    html = (run_dir / "boom.html").read_text()
    assert "first part done" in html and "loss is NaN" in html
    m = json.loads((run_dir / "metrics.json").read_text())
    assert [p["status"] for p in m["notebooks"]] == ["failed", "skipped"]
    assert m["metrics"]["demo"] == {"before": 1}


def test_a_kernel_slow_to_start_is_started_again_not_lost(tmp_path, monkeypatch):
    """A kernel that does not answer within ``report.kernel_start_timeout`` (here: it sleeps 10 s on its first
    start only, as a loaded machine does) is started again; the notebook runs and the report is written. Before,
    the run stopped at "Kernel didn't respond in 60 seconds"."""
    slow = tmp_path / "slow_kernel.py"
    slow.write_text(
        "import os, sys, time\n"
        "if not os.path.exists(sys.argv[1]):\n"
        "    open(sys.argv[1], 'w').close()\n"
        "    time.sleep(10)\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'ipykernel_launcher', '-f', sys.argv[2]])\n"
    )
    spec = tmp_path / "jupyter/kernels/azllm"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, str(slow), str(tmp_path / "started-once"), "{connection_file}"],
                "display_name": "slow",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    nb_dir = tmp_path / "nbs"
    nb_dir.mkdir()
    nbformat.write(
        new_notebook(
            cells=[
                new_code_cell('params_file = ""\nout_dir = ""', metadata={"tags": ["parameters"]}),
                new_code_cell("print('ran')"),
            ]
        ),
        str(nb_dir / "hello.ipynb"),
    )
    params = tmp_path / "p.yaml"
    params.write_text("run_name: slow\nnotebooks: [hello]\nreport: {kernel_start_timeout: 4}\n")
    run_dir, ok = run_report(params, reports_dir=tmp_path / "reports", notebooks_dir=nb_dir)
    assert ok and "ran" in (run_dir / "hello.html").read_text()
    (page,) = json.loads((run_dir / "metrics.json").read_text())["notebooks"]
    assert page["status"] == "ok" and page["kernel_starts"] == 2


def test_cli_rejects_params_typo_with_exit_code_2(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("tokenizer:\n  vocab_sise: 10\n")
    r = subprocess.run(
        [sys.executable, "-m", "azllm", "run", str(params), "--reports", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert r.returncode == 2
    assert "vocab_sise" in r.stderr and "vocab_size" in r.stderr


def test_unknown_notebook_is_a_params_error(tmp_path):
    from azllm.config import ParamsError

    params = tmp_path / "p.yaml"
    params.write_text("notebooks: [99_nope]\n")
    with pytest.raises(ParamsError, match="99_nope"):
        run_report(params, reports_dir=tmp_path)


def test_metrics_keys_are_snake_case_or_names_in_a_named_map():
    """The schema of metrics.json (report.key_problems): every key is snake_case, except the keys of the maps of
    report.NAMED_MAPS (names the user or the data chose); every notebook test checks its metrics.json with it
    (conftest.run_notebooks)."""
    from azllm.report import key_problems

    good = {
        "run": {"params": {"evaluate": {"probe": {"C": 1.0}}}, "packages": {"liger-kernel": "0.5"}},
        "inputs": {"eval.flores": {"sha256": {"/data/a b.txt": "0" * 64}}},
        "metrics": {
            "train": {"final": {"FLORES-dev": {"bpb": 1.0}}, "tokens_per_s": 1.0},
            "evaluate": {"after": {"keep-lora": {"tasks": {"MMLU az": {"acc": 0.5}}}}},
            "tokenizers": {"recipe": [{"fertility": {"flores.en": 1.2}, "corpus_mb": 1.0}]},
        },
    }
    assert key_problems(good) == []
    bad = {
        "metrics": {
            "adapt": {"runs": [{"az bpb after": 1.0}]},
            "train": {"final": {"val": {"Bpb": 1.0}}},  # a named map's values are checked
            "benchmark": {"variants": [{"speed ×": 1.0}], "batch@256": 1},
        }
    }
    assert key_problems(bad) == [
        "metrics.adapt.runs.[].az bpb after",
        "metrics.train.final.val.Bpb",
        "metrics.benchmark.variants.[].speed ×",
        "metrics.benchmark.batch@256",
    ]
