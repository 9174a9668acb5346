"""Small helpers shared by every module: atomic writes, seeding, machine facts, package versions."""

from __future__ import annotations

import json
import os
import platform
import random
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_json", "seed_everything", "machine_info",
           "package_versions", "git_commit", "peak_rss_mb", "vm_hwm_mb", "reset_peak_rss", "progress", "PACKAGES"]

PACKAGES = ["azllm", "torch", "transformers", "accelerate", "liger-kernel", "triton", "peft", "bitsandbytes",
            "sentencepiece", "tokenizers", "tiktoken", "datasets", "numpy", "papermill", "nbconvert", "matplotlib"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to a temporary file beside ``path``, fsync it, then rename it over ``path``.

    A reader sees either the old file or the new one, never half of one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True, default=str) + "\n")


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA)."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:
        pass
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:
        pass


def machine_info() -> dict:
    """What ran this: OS, CPU, cores, memory, GPU (if any)."""
    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": _cpu_name(),
        "cpu_count": os.cpu_count(),
    }
    try:
        import psutil

        info["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    try:
        import torch

        info["cuda"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            info["cuda_version"] = torch.version.cuda
    except ImportError:
        pass
    return info


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def package_versions(names: list[str] | None = None) -> dict[str, str | None]:
    out = {}
    for n in names or PACKAGES:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def git_commit(repo: str | os.PathLike | None = None) -> str | None:
    """The current commit (with ``-dirty`` when the tree has uncommitted changes), or None outside git."""
    cwd = str(repo or Path(__file__).resolve().parent.parent)
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


def vm_hwm_mb() -> float | None:
    """This process's RSS high-water mark in MiB (``VmHWM`` of ``/proc/self/status``, Linux), or None elsewhere.

    Unlike ``getrusage``'s ``ru_maxrss``, which is inherited across ``fork`` (a fresh child can report its
    parent's peak), ``VmHWM`` belongs to this process image and can be reset with :func:`reset_peak_rss`.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset this process's RSS high-water mark (``/proc/self/clear_refs`` "5", Linux); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB: :func:`vm_hwm_mb`, else ``ru_maxrss``."""
    hwm = vm_hwm_mb()
    if hwm is not None:
        return hwm
    import resource
    import sys

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 2**20 if sys.platform == "darwin" else r / 1024


def progress(iterable=None, **kwargs):
    """A tqdm progress bar that also reads well in executed notebooks: plain text (no widgets), refreshed at most
    every 5 s when stderr is not a terminal, so that an HTML report keeps a short trace instead of hundreds of lines.
    """
    import sys

    from tqdm import tqdm

    if not sys.stderr.isatty():
        kwargs.setdefault("mininterval", 5.0)
    return tqdm(iterable, **kwargs)
