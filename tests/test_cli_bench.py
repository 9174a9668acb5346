"""``azllm bench ...`` (azllm.cli_bench): each benchmark command run for real on tiny params (its recipe measures in
fresh processes), and the options a user gives reaching the recipe while the rest keep the recipe's defaults."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_helpers import azllm, tiny_params

from azllm.cli_bench import given
from conftest import REPO


def test_only_the_given_options_reach_the_recipe():
    args = SimpleNamespace(rounds=3, steps=None, methods=["full", "lora"])
    assert given(args, "rounds", "steps", "methods") == {"rounds": 3, "methods": ("full", "lora")}
    assert given(args, "steps") == {}


@pytest.mark.slow  # the encoder variants in fresh processes on 4 KB per file (~60 s)
def test_bench_encoder_runs(tmp_path, monkeypatch, capsys):
    p = azllm(
        ["bench", "encoder", str(tiny_params(tmp_path)), "--quick", "--out", str(tmp_path / "b.json")],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert (tmp_path / "b.json").is_file() and "encoder" in p.stdout.lower()


@pytest.mark.slow  # one round of one method in a fresh process (~40 s)
def test_bench_methods_runs(tmp_path, monkeypatch, capsys):
    p = azllm(
        ["bench", "methods", str(tiny_params(tmp_path)), "--rounds", "1", "--steps", "2", "--methods", "full"],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert "round 0 full" in p.stdout and "written:" in p.stdout


@pytest.mark.slow  # one round, both paths, 6 steps (~40 s)
def test_bench_overhead_runs(tmp_path, monkeypatch, capsys):
    p = azllm(
        ["bench", "overhead", str(tiny_params(tmp_path)), "--rounds", "1", "--steps", "6"],
        tmp_path,
        monkeypatch,
        capsys,
    )
    assert "median over 1 rounds" in p.stdout and "ratio" in p.stdout


def test_the_gpu_params_run_the_variants_users_pick():
    """params/gpu.yaml measures Liger with LoRA and with QLoRA (checkpointing off and on), an 8-bit optimizer and
    QLoRA prepared as peft does beside today's variants; every name is one the memory model and the children read."""
    from azllm import memory as mem
    from azllm.config import read_yaml

    names = read_yaml(REPO / "params" / "gpu.yaml")["benchmark"]["variants"]
    users = {"liger+lora", "liger+lora+ckpt", "liger+qlora", "liger+qlora+ckpt", "liger+paged8", "qlora+kbit32"}
    assert users | {"baseline", "ckpt", "liger", "liger+ckpt", "lora", "lora+ckpt", "qlora", "qlora+ckpt"} == set(names)
    parsed = {n: mem.parse_variant(n) for n in names}
    assert parsed["liger+paged8"].optimizer == "paged_adamw_8bit" and parsed["qlora+kbit32"].kbit_fp32_rest
    assert not parsed["liger+qlora+ckpt"].kbit_fp32_rest and parsed["liger+qlora+ckpt"].quant == 4


@pytest.mark.slow  # a kernel and one variant's process (~30 s on 2 idle cores; more when the machine is shared)
def test_gpu_entry_dry_run(tmp_path, monkeypatch, capsys):
    """``azllm bench gpu --dry-run --variants ...``: the GPU run's path on CPU, only the variants named, without the
    baseline (its ratios are then against the first variant that ran). The baseline runs in notebook 04's tiny
    benchmark and on the bare image below, LoRA in notebook 04, QLoRA with checkpointing on the bare image."""
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)  # the notebook's kernel runs as under make (conftest)
    chosen = ["qlora+kbit32", "liger"]
    p = azllm(
        ["bench", "gpu", "--dry-run", "--reports", str(tmp_path), "--variants", *chosen], tmp_path, monkeypatch, capsys
    )
    m = json.loads((tmp_path / "gpu-dry-run" / "metrics.json").read_text())  # under --reports
    rows = {r["variant"]: r for r in m["metrics"]["benchmark"]["variants"]}
    assert set(rows) == set(chosen)
    assert rows["qlora+kbit32"]["status"] == "ok", rows["qlora+kbit32"]
    assert rows["qlora+kbit32"]["speed_ratio"] == rows["qlora+kbit32"]["memory_ratio"] == 1.0  # the first that ran
    assert rows["liger"]["status"] in ("ok", "unavailable")
    if rows["liger"]["status"] == "unavailable":
        assert "not available on this device" in rows["liger"]["note"]
    assert "| variant |" in p.stdout and "job: 1e+09 tokens on 1 x ml.p4d.24xlarge" in p.stdout
    assert "spot $" in p.stdout
    assert (tmp_path / "gpu-dry-run" / "04_benchmark.html").is_file()


# What a CUDA image with torch, transformers, peft and the carried wheels lacks: the notebook stack and the data tools
BARE_IMAGE_LACKS = (
    "papermill nbformat nbconvert nbclient jupyter_client ipykernel ipython jupyterlab matplotlib pandas datasets "
    "datatrove sentencepiece trl lm_eval sacrebleu ray sagemaker"
).split()


def _bare_python(where: Path) -> Path:
    """A virtual environment at ``where`` whose site-packages holds this one's packages (symlinked) less
    :data:`BARE_IMAGE_LACKS`, modules and metadata alike: a process started from it, and every child it starts
    with ``sys.executable``, finds those packages not installed."""
    import re
    import site
    import subprocess
    import sys

    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    here = Path(site.getsitepackages()[0])
    there = next(where.glob("lib/python*/site-packages"))
    lacks = {n.lower().replace("-", "_") for n in BARE_IMAGE_LACKS}
    for entry in here.iterdir():
        top = re.split(r"-\d", entry.name.lower())[0].removesuffix(".py").replace("-", "_")  # pandas-2.2.dist-info
        if top.split(".")[0] not in lacks:
            (there / entry.name).symlink_to(entry)
    return where / "bin" / "python"


@pytest.mark.slow  # a virtual environment and 3 fresh processes (~30 s on 2 idle cores)
def test_the_gpu_run_measures_on_a_bare_image_and_renders_elsewhere(tmp_path):
    """``python -m azllm bench gpu --dry-run --no-report`` where the notebook stack and the data tools are not
    installed (as on a CUDA image with only torch, transformers and the carried wheels), the variants' fresh
    processes included: it writes metrics.json, which ``azllm results`` then renders here, planner ratio and all."""
    import subprocess

    python = _bare_python(tmp_path / "bare")
    env = {**__import__("os").environ, "AZLLM_ARTIFACTS": str(tmp_path / "art")}
    env.pop("PYTEST_CURRENT_TEST", None)
    for name in ("pandas", "papermill", "IPython"):  # the bare environment lacks them for real
        gone = subprocess.run([str(python), "-c", f"import {name}"], capture_output=True, text=True, timeout=60)
        assert gone.returncode != 0 and "No module named" in gone.stderr, name
    cmd = [str(python), "-m", "azllm", "bench", "gpu", "--dry-run", "--no-report", "--reports", str(tmp_path)]
    r = subprocess.run(
        [*cmd, "--variants", "baseline", "qlora+ckpt"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    run = tmp_path / "gpu-dry-run"
    doc = json.loads((run / "metrics.json").read_text())
    rows = {r["variant"]: r for r in doc["metrics"]["benchmark"]["variants"]}
    assert set(rows) == {"baseline", "qlora+ckpt"} and all(r["status"] == "ok" for r in rows.values()), rows
    assert doc["run"]["params_hash"] and doc["run"]["packages"]["torch"] and not (run / "index.html").exists()
    assert doc["run"]["packages"]["papermill"] is None  # the record says what the image had
    assert "| variant |" in r.stdout and "qlora+ckpt" in r.stdout
    from azllm.record import read_record
    from azllm.results import markdown

    page = markdown(read_record(run))
    ratio = doc["metrics"]["benchmark"]["predicted_vs_measured"][1]["predicted_over_measured"]
    assert "planner ÷ measured" in page and f"| {ratio:.2f} |" in page
