"""The layout rules of the package: short modules and functions (or a docstring that says why), no issue
numbers in code, library modules that never read the params (only the run layer and the entry points do)."""

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "azllm"
MODULES = sorted(PKG.rglob("*.py"))
# the run layer and the entry points read a Config; the library modules take plain named arguments
READS_CONFIG = {"run.py", "adapt.py", "sagemaker.py", "config/__init__.py", "report.py", "__main__.py", "bench/gpu.py",
                "bench/encoder.py", "bench/methods.py", "launch.py", "study.py"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_functions_are_short_or_say_why(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
            doc = ast.get_docstring(node) or ""
            assert "Long because" in doc, f"{path.name}:{node.name} is {node.end_lineno - node.lineno + 1} lines"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_modules_are_short(path):
    n = len(path.read_text().splitlines())
    assert n <= 520, f"{path.relative_to(PKG)} has {n} lines"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_issue_numbers_and_only_the_run_layer_reads_params(path):
    text = path.read_text()
    assert not re.search(r"(?i)\bissue\s*#?\d|\(#\d+\)", text), path
    rel = str(path.relative_to(PKG))
    if rel not in READS_CONFIG:
        assert not re.search(r"^\s*from \.+config import|load_params\(", text, re.M), f"{rel} reads the params"
