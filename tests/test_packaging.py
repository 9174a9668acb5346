"""The built wheel (pyproject.toml: packages by discovery, the task YAMLs as package data) holds every module and
data file of azllm/, and an install of that wheel, not the editable checkout, imports azllm.sft."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from the tracked files alone, as from a fresh clone (the checkout's own ``azllm.egg-info``
    of the editable install lists every file, and hid the missing package)."""
    import shutil

    src, out = tmp_path_factory.mktemp("clone"), tmp_path_factory.mktemp("wheel")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        if (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    (whl,) = out.glob("azllm-*.whl")
    return whl


def test_the_wheel_holds_every_module_and_task_yaml(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {
        str(p.relative_to(REPO))
        for p in (REPO / "azllm").rglob("*")
        if p.is_file() and p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts
    }
    assert {"azllm/sft/train.py", "azllm/evaluation/tasks/sib200_az.yaml"} <= wanted
    assert not wanted - names, sorted(wanted - names)


def test_an_install_of_the_wheel_imports_azllm_sft(wheel, tmp_path):
    """Installed into a folder of its own (no dependencies: they are this venv's), with the editable checkout's
    import finder taken out, ``azllm.sft`` and the shipped tasks come from the installed wheel."""
    target = tmp_path / "site"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    code = (
        "import sys\n"
        "sys.meta_path = [f for f in sys.meta_path if 'editable' not in repr(f)]\n"
        f"sys.path.insert(0, {str(target)!r})\n"
        "import azllm, azllm.sft.train, azllm.sft.data\n"
        "from azllm.evaluation.tasks import LOCAL_TASKS\n"
        f"assert azllm.__file__.startswith({str(target)!r}), azllm.__file__\n"
        "assert 'sib200_az' in LOCAL_TASKS and LOCAL_TASKS['sib200_az'].is_file()\n"
        "print(azllm.sft.train.__file__)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith(str(target))
