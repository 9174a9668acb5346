"""The command line run as a user types it, in this process: a tiny params file and ``azllm ARGS`` through
:func:`azllm.cli.main` (tests/test_cli.py, tests/test_cli_bench.py)."""

from pathlib import Path
from types import SimpleNamespace

from train_helpers import tiny_params_file

from azllm.cli import main
from conftest import REPO


def tiny_params(tmp_path: Path) -> Path:
    train = {
        "batch_size": 2,
        "block_size": 32,
        "max_steps": 3,
        "warmup_steps": 1,
        "eval_steps": 3,
        "save_steps": 3,
        "logging_steps": 1,
        "eval_max_tokens": 256,
        "untimed_steps": 1,
        "report_to": [],
    }
    bench = {"benchmark": {"quick": True, "scale": 2, "max_bytes_per_file": 4000, "block_size": 32}}
    return tiny_params_file(tmp_path / "tiny.yaml", "cli", train, corpus={"enabled": False}, tokens=bench)


def azllm(args: list[str], tmp_path: Path, monkeypatch, capsys) -> SimpleNamespace:
    """``azllm ARGS`` through the command line's own entry, in this process (``python -m azllm`` and the console
    script are run as processes by test_the_console_entry_and_python_m); its exit code 0 and its stdout."""
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.chdir(REPO)
    code = main(list(args))
    out = capsys.readouterr()
    assert code == 0, out.out[-3000:] + out.err[-3000:]
    return SimpleNamespace(stdout=out.out, stderr=out.err)
