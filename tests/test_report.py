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


def test_the_index_answers_the_study_beside_its_reference_points():
    """The answers are read from the parts the notebooks record (the recipes' results, as in metrics.json): every
    number and every winner is read, none computed or chosen here; a part a run did not produce is left out."""
    from azllm.report import _headline

    extend = {
        "way": "extend",
        "method": "lora",
        "az_bpb_before": 3.1,
        "az_bpb_after": 2.2,
        "en_bpb_before": 1.5,
        "en_bpb_after": 1.6,
        "en_bpb_change": 0.1,
    }
    metrics = {
        "tokenizers": {
            "best": "bpe-32k",
            "best_fertility": 1.44,
            "selected_on": "flores",
            "reference_fertility": {"llama3": 3.41, "aztc-32k": 1.467},
        },
        "train": {
            "final": {"val": {"bpb": 2.4, "uniform_bpb": 4.0}, "flores": {"bpb": 2.37, "uniform_bpb": 3.1}},
            "tokenizer_vocab": 8192,
            "train_bytes_per_token": 3.25,
        },
        "adapt": {"runs": [{**extend, "way": "keep", "method": "full", "az_bpb_after": 2.5}, extend], "best": extend},
        "benchmark": {
            "variants": [
                {"variant": "baseline", "status": "ok", "speed_ratio": 1.0, "memory_ratio": 1.0},
                {"variant": "liger", "status": "unavailable", "speed_ratio": None},
            ],
            "fastest_variant": "baseline",
            "cost": [{"variant": "baseline", "usd_per_billion_tokens": 1234.0, "price_per_hour": 3.5}],
            "cheapest_variant": "baseline",
        },
        "evaluate": {
            "az_headline": "sib200_az_probe",
            "en_headline": "sib200_en_probe",
            "top": {
                "way": "swap",
                "method": "full",
                "az_gain": 0.12,
                "az_gain_se": 0.03,
                "az_verdict": "gain",
                "en_change": -0.05,
                "en_verdict": "within noise",
            },
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
    # liger did not run; the winner is the recipe's
    assert rows["Speed × and memory × of each technique"][0] == "baseline 1.00 / 1.00 (fastest: baseline)"
    assert rows["$ per billion tokens"][0] == "baseline $1,234 (cheapest: baseline)"
    assert _headline({}) == []
    # every task that moved beyond the noise follows the headline, or the answer says that none did
    up = {"task": "flores_en_az", "way": "extend", "method": "lora", "delta": 1.947, "delta_se": 0.731}
    up["verdict"] = "gain"
    metrics["evaluate"]["moved"] = {"base_at_chance": False, "az": [up], "en": []}
    answer = dict((q, a) for q, a, _, _ in _headline(metrics))["Most Azerbaijani per device-hour (downstream)"]
    assert answer.endswith("(within noise); beyond the noise: extend / lora flores_en_az +1.95 ± 0.73 (gain)")
    metrics["evaluate"]["moved"] = {"base_at_chance": False, "az": [], "en": []}
    answer = dict((q, a) for q, a, _, _ in _headline(metrics))["Most Azerbaijani per device-hour (downstream)"]
    assert answer.endswith("(within noise); no task beyond the noise")
    # a base at chance on every multiple-choice task: the answer says so and points to the real base's run
    for moved in ({"base_at_chance": True}, {"base_at_chance": False, "stand_in": True}):
        metrics["evaluate"]["moved"] = moved
        answer = dict((q, a) for q, a, _, _ in _headline(metrics))["Most Azerbaijani per device-hour (downstream)"]
        assert answer.startswith("none here: this base is a stand-in") and "smollm2.yaml" in answer


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


def _keys_read(fn) -> set[str]:
    """The constant keys a function reads: ``x["key"]`` and ``x.get("key")``."""
    import ast
    import inspect
    import textwrap

    keys = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(fn)))):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            keys.add(node.slice.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            keys.add(node.args[0].value)
    return {k for k in keys if isinstance(k, str)}


def _keys_written() -> set[str]:
    """The constant keys the recipes and the library write (dict literals, ``dict(key=...)`` / ``.update(key=...)``,
    ``x["key"] = ...``) and the sections and keys the notebooks record (``report.record(out_dir, "section", {...})``):
    never tables.py, plots.py, report.py or the command line."""
    import ast

    pkg = REPO / "azllm"
    presentation = {pkg / f for f in ("tables.py", "plots.py", "report.py", "cli.py", "__main__.py")}
    keys: set[str] = set()
    for path in [p for p in sorted(pkg.rglob("*.py")) if p not in presentation] + sorted(REPO.glob("notebooks/*.py")):
        notebook = path.parent.name == "notebooks"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict) and not notebook:
                keys.update(k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
            elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if name in ("dict", "update") and not notebook:
                    keys.update(k.arg for k in node.keywords if k.arg)
                if name == "record" and notebook and len(node.args) == 3:
                    section, values = node.args[1], node.args[2]
                    keys.add(section.value if isinstance(section, ast.Constant) else "")
                    if isinstance(values, ast.Dict):
                        keys.update(k.value for k in values.keys if isinstance(k, ast.Constant))
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and not notebook:
                if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    keys.add(node.slice.value)
    return keys


def test_every_key_the_index_reads_is_written_by_a_recipe():
    """Statically: each key the index's answers read (report._headline and its helpers) is a key that a recipe (or
    the library a recipe returns from) writes, or a section / key a notebook records; a display label such as
    "speed ×" or "az bpb after" (which the index once read back from rows the tables had labelled) is not."""
    from azllm import report

    helpers = (
        report._tokenizer_answer,
        report._bpb_answer,
        report._adapt_answer,
        report._eval_answer,
        report._distill_answer,
        report._technique_answers,
    )
    read = set().union(*map(_keys_read, helpers))
    assert {"best", "final", "uniform_bpb", "az_bpb_after", "top", "speed_ratio", "fastest_variant"} <= read
    written = _keys_written()
    assert not {"speed ×", "az bpb after", "$ per 1B tokens", "price/h"} & written  # labels are written nowhere
    assert read - written == set()


def test_every_stage_has_its_answer_on_the_index():
    """One answer per notebook (conftest.ANSWERED_BY, which every notebook test checks against the index it
    renders); the corpus, token-file and instruction-tuning rows read the numbers their pages record."""
    from azllm.report import _headline
    from conftest import ANSWERED_BY

    assert set(ANSWERED_BY) == {p.stem for p in (REPO / "notebooks").glob("*.ipynb")}
    metrics = {
        "corpus": {
            "counts": {"by_source": {"total": {"input_bytes": 27_000_000, "kept_bytes": 21_600_000, "kept_docs": 5}}},
            "mix": [{"mix_mb": 10.0, "dropped_sentences_pct": 2.5}, {"mix_mb": 2.5, "dropped_sentences_pct": 0.5}],
            "sentence_filter": {"false_positive": 2e-5},
        },
        "tokens_split": {"train_tokens": 1_000_000, "val_tokens": 10_000, "val_share_of_docs": 0.01},
        "tokens_benchmark": {"ratios": {"c_over_limit_1x": 0.93}},
        "sft": {
            "chrf_before_after": {
                "n": 24,
                "before": 9.14,
                "after": 7.37,
                "delta": -1.77,
                "delta_se": 0.83,
                "verdict": "loss",
            },
            "tasks_before_after": [
                {"task": "sib200_az", "delta": 0.128, "verdict": "gain"},
                {"task": "tumlu_az", "delta": 0.01, "verdict": "within noise"},
            ],
        },
    }
    rows = {q: a for q, a, _, _ in _headline(metrics)}
    assert rows["What the corpus stage kept"] == (
        "21.6 of 27.0 MB (80.0%), 5 documents; the mix: 12.5 MB; near-duplicate sentences dropped in the mix: up "
        "to 2.5% of a source (filter false-positive rate 2.0e-05)"
    )
    assert rows["Token files"] == (
        "1,000,000 training and 10,000 validation tokens (1.0% of the documents held out); the encoder at 0.93× "
        "the tokenizer's own batch encode"
    )
    assert rows["Does instruction tuning help (held-out answers)"] == (
        "chrF++ of 24 held-out answers 9.14 → 7.37 (-1.77 ± 0.83, loss); beyond the noise on the tasks: "
        "sib200_az +0.128 (gain)"
    )
    metrics["sft"]["stages"] = [
        {"model": "original base", "chrf": 10.0, "delta": None, "loop_share": 0.25},
        {"model": "adapted", "chrf": 9.0, "delta": -1.0, "delta_se": 0.5, "verdict": "within noise", "mde": 1.4,
         "loop_share": 0.0},
        {"model": "SFT only", "chrf": 12.0, "delta": 2.0, "delta_se": 0.5, "verdict": "gain", "mde": 1.4,
         "loop_share": 0.0},
    ]  # fmt: skip
    rows = {q: a for q, a, _, _ in _headline(metrics)}
    assert rows["Does instruction tuning help (held-out answers)"].endswith(
        "; against the original base (chrF++ 10.00, loop rate 25%): adapted -1.00 ± 0.50 (within noise, MDE 1.40, "
        "loop rate 0%), SFT only +2.00 ± 0.50 (gain, MDE 1.40, loop rate 0%)"
    )
    metrics["sft"]["stages"] = metrics["sft"]["stages"][1:]  # no controls: the two stages are the line above
    assert (
        "against" not in {q: a for q, a, _, _ in _headline(metrics)}["Does instruction tuning help (held-out answers)"]
    )
