"""A one-node Slurm cluster for the tests, from Debian's packages (``slurmctld``, ``slurmd``, ``slurm-client``,
``munge``; ``make test`` installs them: ``.ci/system-packages``): a fixture writes its ``slurm.conf`` in a temporary
folder, starts its own ``munged`` (own key and socket in that folder, so a stale ``/run/munge`` socket or a system
daemon cannot break it), ``slurmctld`` and ``slurmd``, points ``SLURM_CONF`` at it and stops the daemons at the end.
When they cannot start the test fails and says why: it never skips."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

SLURM_CONF = """ClusterName=azllm-test
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge/munge.socket
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
NodeName={host} CPUs={cpus} RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fail(why: str, folder: Path) -> None:
    logs = "".join(
        f"\n--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in sorted(folder.glob("*.log")) if p.is_file()
    )
    pytest.fail(f"the one-node Slurm cluster did not start: {why}{logs}")


def _stop_what_is_left(folder: Path, conf: Path, wait_s: float = 5.0) -> None:
    """Kill this cluster's daemons that outlive its shutdown (its ``SLURM_CONF``, or its folder as working
    directory): a ``slurmstepd`` whose job-complete message finds no controller retries it every 24 s for good,
    and ``slurmd`` waits for it (seen after the job that a test stops with SIGTERM)."""
    import psutil

    ours = []
    for proc in psutil.process_iter(["name"]):
        if (proc.info["name"] or "").startswith("slurm"):
            try:
                if proc.environ().get("SLURM_CONF") == str(conf) or proc.cwd() == str(folder):
                    ours.append(proc)
            except psutil.Error:
                pass
    for proc in ours:
        if proc.info["name"] == "slurmstepd":  # orphaned: nothing will ever answer it
            proc.kill()
    for proc in psutil.wait_procs(ours, timeout=wait_s)[1]:
        proc.kill()


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """``{"conf", "partition"}`` of a running one-node cluster; ``SLURM_CONF`` is set for this process and what it
    starts."""
    missing = [t for t in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo") if not shutil.which(t)]
    d = tmp_path_factory.mktemp("slurm")
    if missing:
        _fail(f"{missing} not installed (apt-get install slurmctld slurmd slurm-client munge)", d)
    host = socket.gethostname().split(".")[0]
    conf = d / "slurm.conf"
    conf.write_text(
        SLURM_CONF.format(host=host, d=d, ctld_port=_free_port(), d_port=_free_port(), cpus=os.cpu_count() or 1)
    )
    (d / "state").mkdir()
    (d / "spool").mkdir()
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    munge = d / "munge"
    munge.mkdir(mode=0o700)
    p = subprocess.run(["mungekey", "--create", f"--keyfile={munge / 'munge.key'}"], capture_output=True, text=True)
    if p.returncode != 0:
        _fail(f"mungekey: {p.stderr.strip()}", d)
    p = subprocess.run(
        [
            "munged",
            "--force",
            f"--socket={munge / 'munge.socket'}",
            f"--key-file={munge / 'munge.key'}",
            f"--pid-file={munge / 'munged.pid'}",
            f"--log-file={d / 'munged.log'}",
            f"--seed-file={munge / 'munged.seed'}",
        ],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        _fail(f"munged: {p.stderr.strip()}", d)
    for daemon in ("slurmctld", "slurmd"):
        p = subprocess.run([daemon], capture_output=True, text=True)
        if p.returncode != 0:
            _fail(f"{daemon}: {p.stderr.strip()}", d)
        time.sleep(1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout.strip()
        if state == "idle":
            break
        time.sleep(1)
    else:
        _fail(f"the node is {state!r} after 60 s", d)
    try:
        yield {"conf": conf, "partition": "debug"}
    finally:
        subprocess.run(["scancel", "--partition", "debug"], capture_output=True)  # no job outlives its cluster
        subprocess.run(["scontrol", "shutdown"], capture_output=True)
        for pid_file in ("slurmd.pid", "slurmctld.pid"):
            try:
                os.kill(int((d / pid_file).read_text()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        try:
            os.kill(int((munge / "munged.pid").read_text()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
        _stop_what_is_left(d, conf)
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
