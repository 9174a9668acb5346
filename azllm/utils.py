"""Small helpers shared by every module: atomic writes, seeding, machine facts, package versions."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "seed_everything",
    "machine_info",
    "package_versions",
    "git_commit",
    "json_hash",
    "replace_dir",
    "write_environment_yml",
    "torch_dtype",
    "DTYPES",
    "REPO_ROOT",
    "DEFAULT_SEED",
    "LIGER_KERNELS",
    "OPTIMIZERS",
    "peak_rss_mb",
    "vm_hwm_mb",
    "reset_peak_rss",
    "progress",
    "PACKAGES",
    "exit_now",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The repository root (notebooks/, params/), for an editable install."""

DEFAULT_SEED = 1234
"""The seed of a run when the params name none (``seed``), and of library calls that are not given one."""

DTYPES = ("fp32", "bf16", "fp16")
"""The dtype names of azllm; :func:`torch_dtype` maps them to torch."""

LIGER_KERNELS = ("rope", "rms_norm", "swiglu", "fused_linear_cross_entropy", "cross_entropy")
"""Liger Kernel's kernels that azllm applies to a Llama (:func:`azllm.model.apply_liger`)."""

OPTIMIZERS = ("adamw", "adamw_8bit", "paged_adamw_8bit")
"""Optimizer names (:func:`azllm.lora.make_optimizer`)."""

PACKAGES = [
    "azllm",
    "torch",
    "transformers",
    "accelerate",
    "liger-kernel",
    "triton",
    "peft",
    "bitsandbytes",
    "sentencepiece",
    "tokenizers",
    "tiktoken",
    "datasets",
    "numpy",
    "papermill",
    "nbconvert",
    "matplotlib",
]


def json_hash(obj: Any, n: int | None = 16) -> str:
    """sha256 of the canonical JSON of ``obj`` (sorted keys), first ``n`` hex digits (None: all 64). The one
    hash-of-JSON helper of azllm: params hashes, run keys, token-file keys, tokenizer reuse keys.

    >>> json_hash({"a": 1, "b": [1, 2]}) == json_hash({"b": [1, 2], "a": 1})
    True
    """
    blob = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()
    h = hashlib.sha256(blob).hexdigest()
    return h if n is None else h[:n]


def significant(x, digits: int = 4) -> str:
    """A number as the pages show it: integers (and whole floats) with thousands separators, other numbers to
    ``digits`` significant digits (at 1,000 and above: whole, with separators; below 0.001: one digit fewer), missing
    values as "—". pandas uses it for every table of the pages (:func:`azllm.recipes.setup`).

    >>> [significant(x) for x in (268.940889, 4.413498, 0.632735, 176.910324, 1422.0, 12345.678, 0.0000471, None)]
    ['268.9', '4.413', '0.6327', '176.9', '1,422', '12,346', '4.71e-05', '—']
    """
    import math

    if x is None or isinstance(x, bool):
        return "—" if x is None else str(x)
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(f):
        return "—"
    if math.isinf(f):
        return "∞" if f > 0 else "-∞"
    if f == int(f) and abs(f) < 1e15:
        return f"{int(f):,}"
    if abs(f) >= 1000:
        return f"{f:,.0f}"
    return f"{f:.{digits - 1 if abs(f) < 1e-3 else digits}g}"


def weights_id(model: str | os.PathLike) -> str:
    """What identifies a model's weights for a cache: a local folder's weight files by name, size and modification
    time (what makes a cached score stale), or a hub id as it is.

    >>> weights_id("HuggingFaceTB/SmolLM2-135M")
    'HuggingFaceTB/SmolLM2-135M'
    """
    folder = Path(str(model))
    if not folder.is_dir():
        return str(model)
    files = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin"))
    return json_hash([(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files])


def torch_dtype(name: str):
    """The torch dtype of an azllm dtype name (``fp32`` | ``bf16`` | ``fp16``).

    >>> torch_dtype("bf16")
    torch.bfloat16
    """
    import torch

    table = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    if name not in table:
        raise ValueError(f"dtype must be one of {list(table)}, got {name!r}")
    return table[name]


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


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where it is not there."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: this file system or kernel cannot exchange
        return False
    raise OSError(err, os.strerror(err), str(b))


def replace_dir(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Put the complete folder ``src`` at ``dst``, replacing any folder there, so that ``dst`` always exists once
    it has: the old and the new folder are swapped in one step (``renameat2(RENAME_EXCHANGE)``) and the old one is
    deleted afterwards. Where the kernel or file system cannot swap, the old folder is renamed aside first and the
    new one renamed in (a moment without ``dst``, never a half-written one). The one folder-replace of azllm.

    >>> import tempfile; t = Path(tempfile.mkdtemp())
    >>> (t / "new").mkdir(); _ = (t / "new" / "f").write_text("2"); (t / "out").mkdir()
    >>> replace_dir(t / "new", t / "out").joinpath("f").read_text(), (t / "new").exists()
    ('2', False)
    """
    import shutil

    src, dst = Path(src), Path(dst)
    if not src.is_dir():
        raise FileNotFoundError(f"replace_dir: {src} is not a folder")
    if not dst.exists():
        os.replace(src, dst)
        return dst
    if _exchange(src, dst):
        shutil.rmtree(src, ignore_errors=True)  # src now holds the old folder
        return dst
    old = dst.with_name(f".{dst.name}.old-{os.getpid()}")
    shutil.rmtree(old, ignore_errors=True)
    os.replace(dst, old)
    os.replace(src, dst)
    shutil.rmtree(old, ignore_errors=True)
    return dst


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def machine_info() -> dict:
    """What ran this: OS, CPU, cores, memory, GPU (if any)."""
    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": _cpu_name(),
        "cpu_count": os.cpu_count(),
    }
    import psutil
    import torch

    info["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    info["cuda"] = torch.cuda.is_available()
    if torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["cuda_version"] = torch.version.cuda
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
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
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

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 2**20 if sys.platform == "darwin" else r / 1024


LOG_ENV = "AZLLM_LOG"
"""Environment variable naming the run's log file. The report runner sets it for the notebook kernels: progress
bars and library warnings then go to that file (which the runner echoes to the terminal of ``make report``), not
into the HTML pages."""


_SESSION_LOG: str | None = None
"""A JupyterLab session's log file (:func:`set_session_log`), when no report's ``$AZLLM_LOG`` is set."""


def set_session_log(path: str | os.PathLike) -> Path:
    """Send library output (warnings, loggers, datatrove's log and its workers') of this JupyterLab kernel to ``path``
    instead of the notebook's stderr; progress bars stay widgets in the notebook (:func:`progress`)."""
    global _SESSION_LOG
    p = Path(path).resolve()
    p.parent.mkdir(parents=True, exist_ok=True)
    _SESSION_LOG = str(p)
    return p


ARTIFACTS_ENV = "AZLLM_ARTIFACTS"
"""Where heavy artifacts go (``./artifacts`` when unset)."""


def project_root(cwd: str | os.PathLike | None = None) -> Path:
    """The folder that holds ``params/`` for a process started in its ``notebooks/`` (a JupyterLab kernel), else
    ``cwd``: where the report's kernels run, and where relative params, reports and artifacts paths start.

    >>> project_root("/tmp") == Path("/tmp")
    True
    """
    here = Path(cwd) if cwd is not None else Path.cwd()
    return here.parent if here.name == "notebooks" and (here.parent / "params").is_dir() else here


def session_log() -> Path:
    """A JupyterLab session's log file: ``jupyterlab.log`` in the artifacts folder of :func:`project_root`."""
    return (project_root() / os.environ.get(ARTIFACTS_ENV, "artifacts") / "jupyterlab.log").resolve()


def log_path() -> str | None:
    """The log file of this process: a report's ``$AZLLM_LOG``, else a JupyterLab session's, else None (stderr)."""
    return os.environ.get(LOG_ENV) or _SESSION_LOG


def log_stream():
    """Where library output goes: :func:`log_path` (appended, line-buffered), else stderr."""
    path = log_path()
    if not path:
        return sys.stderr
    global _LOG
    if _LOG is None or _LOG.name != path or _LOG.closed:
        _LOG = open(path, "a", encoding="utf-8", buffering=1)
    return _LOG


_LOG = None


def in_jupyter() -> bool:
    """Whether this process is a Jupyter kernel that a person watches (JupyterLab, Notebook), not a report's kernel
    (whose ``$AZLLM_LOG`` sends progress to the terminal). It imports nothing: ``import azllm`` asks it, and
    importing IPython to answer added 0.07-0.27 s to every process's start."""
    if os.environ.get(LOG_ENV):
        return False
    ipython = sys.modules.get("IPython")  # a kernel imports it before any cell: not imported, not a kernel
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def progress(iterable=None, **kwargs):
    """A progress bar: a widget in JupyterLab (:func:`in_jupyter`, tqdm.auto with ipywidgets), else plain text on
    :func:`log_stream` (the terminal or the run's log, never a report's page).

    >>> sum(progress(range(3), disable=True))
    3
    """
    if in_jupyter() and "file" not in kwargs:
        from tqdm.auto import tqdm as widget

        return widget(iterable, **kwargs)
    from tqdm import tqdm

    stream = log_stream()
    kwargs.setdefault("file", stream)
    if not (hasattr(stream, "isatty") and stream.isatty()):
        kwargs.setdefault("mininterval", 5.0)
    return tqdm(iterable, **kwargs)


def route_warnings() -> None:
    """Send Python warnings and logging records to :func:`log_stream` (light: no heavy import). ``import azllm``
    calls it when ``$AZLLM_LOG`` is set, i.e. in the report's kernels, before any library can warn."""
    import logging
    import warnings

    stream = log_stream()

    def show(message, category, filename, lineno, file=None, line=None):
        stream.write(warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = show
    if os.environ.get(LOG_ENV):  # a report's kernel: its page holds no progress widget
        import tqdm.auto
        import tqdm.std

        tqdm.auto.tqdm, tqdm.auto.trange = tqdm.std.tqdm, tqdm.std.trange  # libraries' bars: text, to the log
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.WARNING)


def route_library_output() -> None:
    """:func:`route_warnings`, and the progress bars and loggers of transformers / datasets / huggingface_hub off
    the notebook's output (called by :func:`azllm.recipes.setup`). Without CUDA, DeepSpeed's accelerator is named CPU
    (``DS_ACCELERATOR``, unless set): every Trainer imports the pinned DeepSpeed, whose own detection would print
    "Setting accelerator to CPU" on stdout, i.e. into the page, and then pick CPU anyway."""
    route_warnings()
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"
    import logging

    import datasets
    import torch
    import transformers

    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.disable_default_handler()
    transformers.utils.logging.enable_propagation()  # to the root logger, i.e. the log
    datasets.disable_progress_bars()
    logging.getLogger("datasets").propagate = True


def write_environment_yml(repo: str | os.PathLike) -> Path:
    """``environment.yml`` (conda) with the same pins as ``requirements.lock`` (``azllm lock-env``; a test checks
    that they agree)."""
    repo = Path(repo)
    pins = [
        ln.strip()
        for ln in (repo / "requirements.lock").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    body = "\n".join(f"      - {p}" for p in pins)
    return atomic_write_text(
        repo / "environment.yml",
        f"""# conda environment with the same pins as requirements.lock
# (generated by `python -m azllm lock-env`; tests/test_env.py checks that they agree).
# conda env create -f environment.yml && conda activate azllm && pip install --no-deps -e .
name: azllm
channels:
  - conda-forge
dependencies:
  - python=3.11
  - pip
  - pip:
{body}
""",
    )


def exit_now(code: int | None) -> NoReturn:
    """End this process with exit status ``code`` (None: 0) as ``sys.exit`` would, less the interpreter's teardown.

    What an exit does for the outside world still happens: the threads that are not daemons are waited for, the
    ``atexit`` handlers run (multiprocessing's, logging's, weakref finalizers such as temporary folders'), and
    stdout and stderr are flushed. What is left out is the teardown of every module, whose garbage collections
    take about 2 s of one core once torch, transformers and peft are imported (2.2-2.6 s against 0.05 s here,
    measured on 2 cores) and free nothing the OS does not free. Only for the ``__main__`` of a process (the
    command line, a benchmark's or a converter's child), never in library code, and only on a normal return: an
    uncaught exception takes the usual path.

    >>> import subprocess, sys
    >>> code = "from azllm.utils import exit_now; import atexit; atexit.register(print, 'bye'); exit_now(3)"
    >>> r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    >>> r.returncode, r.stdout
    (3, 'bye\\n')
    """
    import atexit
    import threading

    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()  # the interpreter's own first step of exiting, which os._exit skips
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be written there
            pass
    os._exit(code or 0)
