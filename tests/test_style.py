"""The repository's style is ruff's (pyproject.toml ``[tool.ruff]``: lint rules E, F, W, I, UP, B; format at 120
characters): ``ruff check`` and ``ruff format --check`` pass on every tracked Python file, notebooks' text twins
included. The ruff that runs is the one pinned in requirements.lock (a different version formats differently)."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_pinned_ruff_runs():
    pin = re.search(r"^ruff==(\S+)$", (REPO / "requirements.lock").read_text(), re.M)
    assert pin, "ruff is pinned in requirements.lock"
    r = _ruff("--version")
    assert r.returncode == 0 and r.stdout.split()[-1] == pin.group(1), r.stdout + r.stderr


def test_ruff_check_passes():
    r = _ruff("check", ".")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_ruff_format_check_passes():
    r = _ruff("format", "--check", ".")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
