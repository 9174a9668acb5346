import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# scripts that tests start in subprocesses (not test modules; --doctest-modules must not import them)
collect_ignore = ["liger_parity.py", "train_entry.py", "train_helpers.py"]


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The data root of the shared corpus ($AZLLM_DATA_ROOT; `make test` sets it to ../shared when present)."""
    root = os.environ.get("AZLLM_DATA_ROOT")
    if not root or not (Path(root) / "data").is_dir():
        pytest.skip("AZLLM_DATA_ROOT is not set to a folder with data/ (run `make test` or export it)")
    return Path(root)
