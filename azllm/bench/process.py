"""The one way azllm starts a fresh measurement process, and its one result format.

Peak memory is process-wide and allocator caches outlive the objects that filled them, so every measurement that
reports memory or throughput runs in a new Python process: :func:`run_fresh` writes a JSON job to a temporary
folder, starts ``python -m azllm.bench.process TARGET JOB RESULT``, and reads back one JSON result. The child
imports ``TARGET`` (``"module:function"``), calls it with the job dict and writes what it returns.

Result format (a dict; the parent never raises for a child's failure):

- ``status``: ``ok`` (the function returned; it may set another status itself, e.g. ``unavailable`` or
  ``oom``), ``error`` (it raised: ``reason`` and ``traceback``), ``killed`` (the process died by a signal
  without a result, e.g. SIGKILL from the kernel's OOM killer: ``reason``), ``timeout`` (no result in
  ``timeout_s``), or ``crashed`` (exited non-zero without a result: ``reason`` holds the tail of stderr);
- ``returncode`` and ``wall_s`` of the process, added by the parent;
- whatever else the function returned.

>>> r = run_fresh("platform:python_version_tuple_dict", {}, timeout_s=60)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from ..utils import atomic_write_json

__all__ = [
    "run_fresh",
    "ok_or_raise",
    "load_warning",
    "others_warning",
    "busy_cpu_seconds",
    "rotation",
    "same_losses",
    "TreeWatch",
]


def rotation(paths, k: int) -> list:
    """The order of round ``k`` of a benchmark that rotates its paths every round.

    >>> rotation(("a", "b", "c"), 1)
    ['b', 'c', 'a']
    """
    k %= len(paths)
    return list(paths[k:]) + list(paths[:k])


def same_losses(a: list[float], b: list[float], rel: float = 1e-4) -> bool:
    """Two paths logged the same losses, each within ``rel`` (of the loss, at least of 1): sums in another order
    (a compact LM head, fused kernels) differ in the last digits only.

    >>> same_losses([2.5, 2.25], [2.5001, 2.25]), same_losses([2.5], [2.6]), same_losses([2.5], [])
    (True, False, False)
    """
    return len(a) == len(b) and all(abs(x - y) <= rel * max(1.0, abs(x)) for x, y in zip(a, b))


def load_warning(loads: list[float], cores: int | None = None) -> dict:
    """``{"load_max", "cores", "load_warning"}`` of the 1-minute load averages a timed benchmark recorded (at the
    start and end of each round); over the core count, a warning is raised and recorded: a timing taken while
    something else ran is no measurement.

    >>> load_warning([0.4, 1.2], cores=2)["load_warning"] is None
    True
    """
    import warnings

    cores = cores or os.cpu_count() or 1
    top = max(loads) if loads else 0.0
    msg = None
    if top > cores:
        msg = (
            f"load average reached {top:.2f} on {cores} cores during the benchmark: other processes competed for "
            "the cores, so these timings are not a measurement; rerun on an idle machine"
        )
        warnings.warn(msg, stacklevel=2)
    return {"load_max": round(top, 2), "cores": cores, "load_warning": msg}


def busy_cpu_seconds() -> float | None:
    """CPU seconds every process of this machine has spent since boot (``/proc/stat``: all but idle and iowait;
    None off Linux)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def others_warning(results: list[dict], cores: int | None = None, limit: float = 0.25) -> dict:
    """``{"others_cores_max", "cores", "load_warning"}`` of fresh-process results (:func:`run_fresh` records
    ``others_cores``: the cores that processes other than the measured one and its children kept busy, on average
    over its run). Unlike the load average, a stage's own worker processes do not count. Above ``limit`` cores, a
    warning is raised and recorded.

    >>> others_warning([{"others_cores": 0.02}, {"others_cores": 0.1}], cores=2)["load_warning"] is None
    True
    """
    import warnings

    cores = cores or os.cpu_count() or 1
    seen = [r["others_cores"] for r in results if r.get("others_cores") is not None]
    top = max(seen) if seen else 0.0
    msg = None
    if top > limit:
        msg = (
            f"other processes kept {top:.2f} of {cores} cores busy during a timed run: these timings are not a "
            "measurement; rerun on an idle machine"
        )
        warnings.warn(msg, stacklevel=2)
    return {"others_cores_max": round(top, 3), "cores": cores, "load_warning": msg}


class TreeWatch:
    """Samples a process and all its descendants every ``interval`` seconds (psutil): each one's CPU seconds (its
    own, not its children's, so nothing is counted twice) and peak RSS as last seen. Workers started by a forkserver
    are not children the measured process waits for, so ``getrusage`` never counts them; this does. A process that
    ends between two samples loses at most ``interval`` of CPU time, and an RSS peak shorter than that can be missed.
    """

    def __init__(self, pid: int, interval: float = 0.25):
        import threading

        self.pid, self.interval = pid, interval
        self.cpu: dict[int, float] = {}
        self.rss: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> bool:
        import psutil

        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return False
        for p in procs:
            try:
                with p.oneshot():
                    t, rss = p.cpu_times(), p.memory_info().rss
            except psutil.Error:
                continue
            self.cpu[p.pid] = t.user + t.system
            self.rss[p.pid] = max(self.rss.get(p.pid, 0), rss)
        return True

    def _run(self) -> None:
        while not self._stop.is_set() and self._sample():
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        """``tree_cpu_s`` (all processes seen), ``tree_processes`` and ``largest_rss_mb`` (the largest one's peak)."""
        return {
            "tree_cpu_s": round(sum(self.cpu.values()), 2),
            "tree_processes": len(self.cpu),
            "largest_rss_mb": round(max(self.rss.values(), default=0) / 2**20, 1),
        }


def run_fresh(
    target: str, job: dict, *, timeout_s: float = 3600, env: dict | None = None, cwd: str | os.PathLike | None = None
) -> dict:
    """Run ``target(job)`` in a fresh Python process and return its result dict (see the module docstring).

    ``env``: variables laid over this process's environment for the child. Added to the result: ``tree_cpu_s``,
    ``tree_processes`` and ``largest_rss_mb`` of the child and every process below it (:class:`TreeWatch`, sampled),
    and ``others_cores``: the machine's busy CPU time during the run less the tree's (the larger of the sampled
    CPU and what ``getrusage`` reports for the reaped children), per second of the run: what other processes took
    (None off Linux).
    """
    import resource

    with tempfile.TemporaryDirectory(prefix="azllm-fresh-") as td:
        jp, rp = Path(td) / "job.json", Path(td) / "result.json"
        jp.write_text(json.dumps(job))
        t0, busy0 = time.time(), busy_cpu_seconds()
        own0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.Popen(
            [sys.executable, "-m", "azllm.bench.process", target, str(jp), str(rp)],
            env={**os.environ, **(env or {})},
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        with TreeWatch(proc.pid) as watch:
            try:
                _, err = proc.communicate(timeout=timeout_s)
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                rc, err = None, ""
        wall, busy1 = time.time() - t0, busy_cpu_seconds()
        own1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        tree = watch.summary()
        own = max(own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime, tree["tree_cpu_s"])
        others = None if busy0 is None or busy1 is None else max(0.0, busy1 - busy0 - own) / max(wall, 1e-9)
        res = json.loads(rp.read_text()) if rp.is_file() else None
    if res is None:
        if rc is None:
            res = {"status": "timeout", "reason": f"no result after {timeout_s:.0f} s"}
        elif rc < 0 or rc == 137:
            res = {"status": "killed", "reason": f"the process was killed by signal {-rc if rc < 0 else 9}"}
        else:
            tail = "\n".join(err.strip().splitlines()[-6:])
            res = {"status": "crashed", "reason": f"exited with {rc}: {tail}"}
    res.update(returncode=rc, wall_s=round(wall, 2), others_cores=None if others is None else round(others, 3), **tree)
    return res


def ok_or_raise(res: dict, what: str) -> dict:
    """``res`` when its status is ``ok``, else a RuntimeError naming ``what`` and the reason."""
    if res.get("status") != "ok":
        raise RuntimeError(f"{what}: {res.get('status')}: {res.get('reason')}\n{res.get('traceback', '')}")
    return res


def _child(target: str, job_path: str, result_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    try:
        module, func = target.split(":")
        res = dict(getattr(importlib.import_module(module), func)(job))
        res.setdefault("status", "ok")
    except Exception as e:  # noqa: BLE001 - every failure becomes a result
        res = {"status": "error", "reason": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
    res.setdefault("pid", os.getpid())
    atomic_write_json(result_path, res)
    return 0


if __name__ == "__main__":
    from ..utils import exit_now

    exit_now(_child(*sys.argv[1:4]))
