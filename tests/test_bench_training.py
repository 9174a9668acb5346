"""The training benchmark (azllm.bench.training) and its fresh-process helper (azllm.bench.process): process
isolation, OOM as a result, the "not available" path, the GPU entry's dry run and the report notebook through
papermill. Tiny shapes only (speed is measured by the notebook, not here)."""

import json
import os
from pathlib import Path

import pytest

from azllm.bench import training as bt
from azllm.bench.process import run_fresh
from azllm.config import load_params
from azllm.recipes import benchmark as bench_recipe
from conftest import FIXTURES, TINY_MODEL, run_notebooks

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "preset": "tiny",
    "vocab_size": 256,
    "data": "synthetic",
    "seq_len": 32,
    "batch_size": 2,
    "untimed_steps": 1,
    "steps": 1,
    "windows": 2,
    "lr": 1e-2,
    "timeout_s": 120,
    "model": TINY_MODEL,
}
TARGETS = {"PYTHONPATH": str(ROOT / "tests")}


@pytest.fixture()
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "artifacts"))
    P = load_params(None, {"run_name": "t", "benchmark": TINY})
    ids, V, _ = bt.synthetic_ids(tmp_path, 256, 20_000, P.seed)

    def job(variant="baseline", **over):
        return {
            **bench_recipe.benchmark_job(P, ids, V),
            "variant": bench_recipe.benchmark_variant(P, variant).to_dict(),
            **over,
        }

    return job


def test_each_variant_runs_in_its_own_fresh_process(setup):
    """One child, away from this process's memory. (Two processes of one variant giving the same losses is notebook
    04's test below: two rounds, two pids, ``loss_last_max_diff == 0``.)"""
    import torch

    hog = torch.ones(64 * 2**20 // 4)  # 64 MiB held by the parent must not show in the child's numbers
    r = bt.run_variant(setup(), timeout_s=120)
    del hog
    assert r["status"] == "ok", r.get("reason")
    assert r["pid"] != os.getpid()
    assert len(r["tokens_per_s"]) == len(r["peak_mb"]) == 2 and all(x > 0 for x in r["tokens_per_s"])
    assert 0 < r["peak_mb"][0] < 64  # the training of a ~0.02M-parameter model, not the parent's hog
    assert r["hwm_reset"] is True
    assert r["loss_last"] < r["loss_first"]


def test_oom_is_a_result_not_a_crash(setup):
    r = bt.run_variant(setup(batch=64, seq=32, mem_cap_mb=8), timeout_s=120)
    assert r["status"] == "oom", r
    assert r["reason"].startswith("OOM at batch 64 (seq 32)")


def test_child_killed_by_sigkill_is_reported_as_oom(setup, monkeypatch):
    """A variant process that dies by SIGKILL (what the kernel's OOM killer does) is an OOM result: a real child
    process is killed here (fresh_targets.kill_self stands in for the variant)."""
    monkeypatch.setattr(
        bt, "run_fresh", lambda target, job, **kw: run_fresh("fresh_targets:kill_self", job, timeout_s=60, env=TARGETS)
    )
    r = bt.run_variant(setup(), timeout_s=60)
    assert r["status"] == "oom" and r["reason"].startswith("OOM at batch 2 (seq 32): child killed")
    assert r["returncode"] == -9


def test_child_error_is_reported_with_reason(setup):
    job = setup()
    r = bt.run_variant({**job, "model_spec": {**job["model_spec"], "preset": "no-such-preset"}}, timeout_s=120)
    assert r["status"] == "error" and "no-such-preset" in r["reason"]


def test_liger_without_cuda_is_not_available_with_reason(setup):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: Liger is available here")
    job = setup("liger_rope")
    r = bt.run_variant(job, timeout_s=120)
    assert r["status"] == "unavailable" and "pid" not in r  # said by the parent: no process started
    assert r["reason"].startswith("not available on this device") and "CUDA" in r["reason"]
    assert r["variant"] == "liger_rope" and (r["batch"], r["seq"]) == (job["batch"], job["seq"])
    child = bt.measure_variant(job)  # what the child says first, had one started
    assert child["status"] == "unavailable" and child["reason"] == r["reason"]


@pytest.mark.slow  # a kernel and six fresh benchmark processes (~30 s on 2 cores)
def test_notebook_runs_on_tiny_params(tmp_path, monkeypatch):
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setenv("AZLLM_DATA_ROOT", str(FIXTURES))
    run_dir, ok = run_notebooks(ROOT / "params" / "tiny.yaml", reports_dir=tmp_path, notebooks=["04_benchmark"])
    assert ok, (run_dir / "metrics.json").read_text()[-3000:]
    m = json.loads((run_dir / "metrics.json").read_text())["metrics"]["benchmark"]
    assert m["n_variants"] == 3 and m["n_ok"] == 2
    assert {r["variant"] for r in m["variants"]} == {"baseline", "lora", "liger"}
    assert m["fit_planner"] and m["cost"] and m["predicted_vs_measured"]
    job = {r["variant"]: r for r in m["job_cost"]}
    assert set(job) == {"baseline", "lora"} and m["job"]["instance"] == "ml.p4d.24xlarge"
    for r in job.values():  # 1e9 tokens at 8 x the measured tokens/s, spot cheaper than on-demand
        assert r["hours"] == pytest.approx(1e9 / (8 * r["tokens_per_s_per_device"]) / 3600)
        assert r["spot_usd"] < r["on_demand_usd"] and r["storage_usd"] >= 0
    assert job["lora"]["checkpoint_gb"] < job["baseline"]["checkpoint_gb"]  # adapters only
    assert all(r["peak_mb_median"] > 0 for r in m["variants"] if r["status"] == "ok")
    # the winners are the recipe's: at one price per hour, the cheapest per token is the fastest
    assert m["fastest_variant"] in {"baseline", "lora"} and m["cheapest_variant"] == m["fastest_variant"]
    base_row = next(r for r in m["variants"] if r["variant"] == "baseline")
    assert base_row["speed_ratio"] == 1.0 and base_row["memory_ratio"] == 1.0
    base = next(r for r in m["results"] if r["variant"] == "baseline")
    assert len(set(base["pids"])) == 2 and len(base["tokens_per_s"]) == 2  # 2 rounds x 1 window, pooled
    assert base["loss_last_max_diff"] == 0.0  # same seed and batches in both processes
    html = (run_dir / "04_benchmark.html").read_text()
    assert ">nan<" not in html.lower() and ">—<" in html  # the unavailable liger row: "—", not nan
    index = (run_dir / "index.html").read_text()
    assert "Speed × and memory ×" in index and "$ per billion tokens" in index
    liger = next(r for r in m["results"] if r["variant"] == "liger")
    assert liger["pids"] == []  # "not available" is said once, by the parent: no process starts only to say it
