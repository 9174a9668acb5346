"""Targets that tests run in fresh processes through azllm.bench.process.run_fresh (importable with PYTHONPATH set
to this folder)."""

import os
import signal


def echo(job: dict) -> dict:
    return {"pid": os.getpid(), "x": job["x"] * 2}


def boom(job: dict) -> dict:
    raise ValueError(f"boom {job['x']}")


def kill_self(job: dict) -> dict:
    """Dies like a process the kernel's OOM killer took: SIGKILL, no result written."""
    os.kill(os.getpid(), signal.SIGKILL)
    return {}


def sleep(job: dict) -> dict:
    import time

    time.sleep(job["s"])
    return {}
