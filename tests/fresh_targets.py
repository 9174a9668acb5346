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


def _burn(seconds: float) -> int:
    """A worker's work: about ``seconds`` of CPU with 120 MB held."""
    import time

    held = bytearray(120 * 2**20)
    held[::4096] = b"x" * len(held[::4096])
    end, n = time.process_time() + seconds, 0
    while time.process_time() < end:
        n += 1
    return n + len(held) * 0


def forkserver_worker(job: dict) -> dict:
    """One worker started by a forkserver (as datatrove starts its workers): not a child this process reaps."""
    import multiprocessing as mp

    with mp.get_context("forkserver").Pool(1) as pool:
        pool.apply(_burn, (job["seconds"],))
    return {}
