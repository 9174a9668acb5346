"""``azllm bench ...`` (azllm.cli_bench): each benchmark command run for real on tiny params (its recipe measures in
fresh processes), and the options a user gives reaching the recipe while the rest keep the recipe's defaults."""

import json
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


@pytest.mark.slow  # 5 child processes (~45 s on 2 idle cores; more when the machine is shared)
def test_gpu_entry_dry_run(tmp_path, monkeypatch, capsys):
    """``azllm bench gpu --dry-run --variants ...``: the GPU run's path on CPU, only the variants named."""
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)  # the notebook's kernel runs as under make (conftest)
    chosen = ["baseline", "lora", "qlora+ckpt", "qlora+kbit32", "liger"]
    p = azllm(
        ["bench", "gpu", "--dry-run", "--reports", str(tmp_path), "--variants", *chosen], tmp_path, monkeypatch, capsys
    )
    m = json.loads((tmp_path / "gpu-dry-run" / "metrics.json").read_text())  # under --reports
    rows = {r["variant"]: r for r in m["metrics"]["benchmark"]["variants"]}
    assert set(rows) == set(chosen)
    for name in ("baseline", "lora", "qlora+ckpt", "qlora+kbit32"):
        assert rows[name]["status"] == "ok", rows[name]
    assert rows["liger"]["status"] in ("ok", "unavailable")
    if rows["liger"]["status"] == "unavailable":
        assert "not available on this device" in rows["liger"]["note"]
    assert "| variant |" in p.stdout and "job: 1e+09 tokens on 1 x ml.p4d.24xlarge" in p.stdout
    assert "spot $" in p.stdout
    assert (tmp_path / "gpu-dry-run" / "04_benchmark.html").is_file()
