"""The one fresh-process helper (azllm.bench.process): every result has a status, a crash and a timeout are
results, the parent only reads JSON."""

import os
from pathlib import Path

from azllm.bench.process import run_fresh

TARGETS = {"PYTHONPATH": str(Path(__file__).resolve().parent)}  # tests/fresh_targets.py


def test_fresh_process_result_protocol():
    a = run_fresh("fresh_targets:echo", {"x": 21}, env=TARGETS, timeout_s=60)
    assert a["status"] == "ok" and a["x"] == 42 and a["pid"] != os.getpid() and a["returncode"] == 0
    e = run_fresh("fresh_targets:boom", {"x": 1}, env=TARGETS, timeout_s=60)
    assert e["status"] == "error" and e["reason"] == "ValueError: boom 1" and "Traceback" in e["traceback"]
    k = run_fresh("fresh_targets:kill_self", {}, env=TARGETS, timeout_s=60)
    assert k["status"] == "killed" and "signal 9" in k["reason"] and k["returncode"] == -9
    c = run_fresh("no_such_module:f", {}, timeout_s=60)
    assert c["status"] == "error" and "no_such_module" in c["reason"]


def test_a_timeout_is_a_result():
    r = run_fresh("fresh_targets:sleep", {"s": 30}, env=TARGETS, timeout_s=2)
    assert r["status"] == "timeout" and "2" in r["reason"]


def test_a_forkserver_workers_cpu_and_memory_are_the_measured_processs_not_others():
    """A worker of a forkserver (as datatrove's) is no child the measured process reaps, so getrusage never sees it:
    the tree watch does: its CPU counts as the run's own (so ``others_cores`` leaves it out), and its 120 MB show as
    the largest process. (``others_cores`` itself depends on what else runs, so it is not asserted here.)"""
    r = run_fresh("fresh_targets:forkserver_worker", {"seconds": 2.0}, env=TARGETS, timeout_s=120)
    assert r["status"] == "ok", r
    assert r["tree_processes"] >= 3 and r["tree_cpu_s"] >= 1.5  # the child, the forkserver, the worker
    assert r["largest_rss_mb"] >= 120 and r["others_cores"] is not None
