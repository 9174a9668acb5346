"""The environment: pins in requirements.lock and environment.yml agree; torch is installed in one pip command
with liger-kernel, peft and bitsandbytes; CI calls the README's test command."""

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def _lock() -> dict[str, str]:
    pins = {}
    for ln in (REPO / "requirements.lock").read_text().splitlines():
        ln = ln.strip()
        if ln and not ln.startswith("#"):
            name, ver = ln.split("==")
            pins[name.lower().replace("_", "-")] = ver
    return pins


def test_environment_yml_carries_the_same_pins():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    conda_pins = {p.split("==")[0].lower().replace("_", "-"): p.split("==")[1] for p in pip}
    assert conda_pins == _lock()


def test_every_direct_dependency_is_pinned():
    lock = _lock()
    direct = [
        ln.strip()
        for ln in (REPO / "requirements.in").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    for d in direct:
        name = re.split(r"[=<>\[]", d)[0].lower()
        assert name in lock, f"{name} is not pinned in requirements.lock"
    assert lock["torch"] == "2.13.0"
    assert {"liger-kernel", "peft", "bitsandbytes"} <= set(lock)


def test_one_pip_command_installs_torch_with_the_gpu_packages():
    mk = (REPO / "Makefile").read_text()
    installs = [ln for ln in mk.splitlines() if "pip install" in ln and "requirements.lock" in ln]
    assert len(installs) == 1  # torch, liger-kernel, peft and bitsandbytes all come from this one command


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    assert "make test" in readme and "make report" in readme
    assert "make test" in (REPO / ".ci/run").read_text()


def test_make_test_installs_its_system_packages_first_or_says_what_to_run(tmp_path):
    """``make test`` runs ``.ci/system-packages`` before pytest; as a user without the packages it stops at once,
    naming every missing package and the command to run (a PATH with only an ``id`` that answers 1000)."""
    import subprocess

    mk = (REPO / "Makefile").read_text()
    recipe = mk.split("\ntest: venv\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert recipe[0].strip() == "bash .ci/system-packages" and "pytest" in recipe[1]
    (tmp_path / "id").write_text("#!/bin/sh\necho 1000\n")
    (tmp_path / "id").chmod(0o755)
    r = subprocess.run(
        ["/bin/bash", str(REPO / ".ci/system-packages")], env={"PATH": str(tmp_path)}, capture_output=True, text=True
    )
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == (
        "make test needs the Debian packages slurmctld slurmd slurm-client munge chromium: "
        "run 'sudo bash .ci/system-packages' first"
    )
    assert subprocess.run(["bash", str(REPO / ".ci/system-packages")]).returncode == 0  # this machine has them
