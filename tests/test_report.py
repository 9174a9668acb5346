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


@pytest.mark.parametrize(
    "data", ["fixture", pytest.param("shared", marks=[pytest.mark.needs_shared, pytest.mark.slow])]
)
def test_tokenizer_notebook_end_to_end(data, tmp_path, monkeypatch):
    """params/tiny.yaml on the fixture corpus (without the baselines, which live in shared/tokenizers) or on the
    full shared folder (with them)."""
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


def test_the_index_answers_the_study_beside_its_reference_points():
    """The answers are read from the parts the notebooks record (shapes as in metrics.json); a part a run did not
    produce is left out."""
    from azllm.report import _headline

    metrics = {
        "tokenizers": {
            "best": "bpe-32k",
            "best_fertility": 1.44,
            "selected_on": "flores",
            "table": [
                {"tokenizer": "llama3", "eval_set": "flores", "fertility": 3.41},
                {"tokenizer": "aztc-32k", "eval_set": "flores", "fertility": 1.467},
                {"tokenizer": "llama3", "eval_set": "xwmt", "fertility": 9.0},
            ],
        },
        "train": {
            "final_val_bpb": 2.4,
            "final_flores_bpb": 2.37,
            "final_val_uniform_bpb": 4.0,
            "final_flores_uniform_bpb": 3.1,
            "tokenizer_vocab": 8192,
            "train_bytes_per_token": 3.25,
        },
        "adapt": {
            "runs": [
                {
                    "way": "keep",
                    "method": "full",
                    "az bpb before": 3.0,
                    "az bpb after": 2.5,
                    "en bpb before": 1.5,
                    "en bpb after": 1.7,
                },
                {
                    "way": "extend",
                    "method": "lora",
                    "az bpb before": 3.1,
                    "az bpb after": 2.2,
                    "en bpb before": 1.5,
                    "en bpb after": 1.6,
                },
            ]
        },
        "benchmark": {
            "variants": [
                {"variant": "baseline", "status": "ok", "speed ×": 1.0, "memory ×": 1.0},
                {"variant": "liger", "status": "unavailable", "speed ×": None},
            ],
            "cost": [{"variant": "baseline", "$ per 1B tokens": 1234.0, "price/h": 3.5}],
        },
        "evaluate": {
            "az_headline": "sib200_az_probe",
            "en_headline": "sib200_en_probe",
            "ranking": [
                {
                    "way": "swap",
                    "method": "full",
                    "az_gain": 0.12,
                    "az_gain_se": 0.03,
                    "az_verdict": "gain",
                    "en_change": -0.05,
                    "en_verdict": "within noise",
                }
            ],
        },
    }
    rows = {q: (a, ref, page) for q, a, ref, page in _headline(metrics)}
    assert rows["Most Azerbaijani per device-hour (downstream)"][0] == (
        "swap / full: sib200_az_probe +0.120 ± 0.030 (gain); English sib200_en_probe -0.050 (within noise)"
    )
    assert rows["Tokens per word"] == ("bpe-32k: 1.440 on flores", "llama3 3.410, aztc-32k 1.467", "01_tokenizers.html")
    assert rows["Held-out bits per byte"][0] == "val 2.400, flores 2.370"
    # each set's own baseline (the training text's bytes per token would give 13 / 3.25 = 4.000 for both)
    assert (
        rows["Held-out bits per byte"][1]
        == "a uniform guess over the vocabulary on the same sets: val 4.000, flores 3.100"
    )
    assert rows["Adaptation that wins (Azerbaijani bpb)"][0].startswith("extend / lora: 3.100 → 2.200")
    assert "(+0.100)" in rows["Adaptation that wins (Azerbaijani bpb)"][0]
    assert rows["Speed × and memory × of each technique"][0] == "baseline 1.00 / 1.00"  # liger did not run
    assert rows["$ per billion tokens"][0] == "baseline $1,234"
    assert _headline({}) == []
    # a base at chance on every multiple-choice task: the answer says so and points to the real base's run
    metrics["evaluate"]["moved"] = {"base_at_chance": True}
    answer = dict((q, a) for q, a, _, _ in _headline(metrics))["Most Azerbaijani per device-hour (downstream)"]
    assert answer.startswith("none here: this base is a stand-in that sits at chance") and "smollm2.yaml" in answer
