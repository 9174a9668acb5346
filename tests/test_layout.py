"""The layout rules of the package: short modules and functions (or a docstring that says why), no issue
numbers in code, library modules that never read the params (only the recipes, the presentation and the command
line do; tests/test_imports.py checks the direction of every import), and no file of the shared folder committed
whole."""

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "azllm"
MODULES = sorted(PKG.rglob("*.py"))
# the recipes, the presentation and the command line read a Config; the library modules take plain named arguments
READS_CONFIG = {"config/__init__.py", "report.py", "answers.py", "cli.py", "cli_bench.py"}


# The caps count lines as ruff formats them (one argument per line once a call passes 120 characters; the code was
# never packed to meet them): a function of more than FUNCTION_LINES lines says why ("Long because"), a module of
# more than MODULE_LINES lines is split by concept.
FUNCTION_LINES = 105
MODULE_LINES = 650


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_functions_are_short_or_say_why(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno >= FUNCTION_LINES
        ):
            doc = ast.get_docstring(node) or ""
            assert "Long because" in doc, f"{path.name}:{node.name} is {node.end_lineno - node.lineno + 1} lines"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_modules_are_short(path):
    n = len(path.read_text().splitlines())
    assert n <= MODULE_LINES, f"{path.relative_to(PKG)} has {n} lines"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_issue_numbers_and_only_the_run_layer_reads_params(path):
    text = path.read_text()
    assert not re.search(r"(?i)\bissue\s*#?\d|\(#\d+\)", text), path
    rel = str(path.relative_to(PKG))
    if rel not in READS_CONFIG and not rel.startswith(("recipes/", "config/")):
        assert not re.search(
            r"^\s*from \.+config import|load_params\(|\bfrom \.+recipes\b|\bimport \.+recipes\b", text, re.M
        ), f"{rel} reads the params"


TESTS = Path(__file__).resolve().parent
NOT_MIRRORED = {
    "__init__.py": "the package itself: tests/test_imports.py reads all of it",
    "__main__.py": "python -m azllm: tests/test_cli.py runs it",
}


def _mirror(path: Path) -> str:
    """``azllm/a/b.py`` -> ``test_a_b.py``; a package's ``__init__.py`` -> ``test_<package>.py``."""
    rel = path.relative_to(PKG).with_suffix("")
    parts = list(rel.parts[:-1]) if rel.name == "__init__" else list(rel.parts)
    return "test_" + "_".join(parts) + ".py"


def _has_code(path: Path) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.parse(path.read_text()).body)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_tests_mirror_the_tree(path):
    """Every module with code has its own test file, named after it (a package's __init__ with only imports and a
    docstring needs none)."""
    rel = str(path.relative_to(PKG))
    if rel in NOT_MIRRORED or (path.name == "__init__.py" and not _has_code(path)):
        return
    assert (TESTS / _mirror(path)).is_file(), f"{rel} has no tests/{_mirror(path)}"


LAYOUT = (PKG.parent / "docs" / "layout.md").read_text()


def _layout_block() -> str:
    return LAYOUT.split("```", 2)[1]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_the_readme_tree_names_every_module(path):
    """The annotated tree of docs/layout.md names every module: a top-level one as ``name.py``, one inside a
    package by its name on the package's lines (``recipes/ ... sft.py``, ``corpus/ ... quality``)."""
    tree = _layout_block()
    rel = path.relative_to(PKG)
    if path.name == "__init__.py":
        want = f"{rel.parent}/" if rel.parent != Path(".") else None
        assert want is None or want in tree, f"the layout's tree does not name {want}"
        return
    if len(rel.parts) == 1:
        assert f"{path.name} " in tree, f"the layout's tree does not name {path.name}"
        return
    pkg = f"  {rel.parts[0]}/"
    lines = tree.split(pkg, 1)[1].split("\n")
    own = [lines[0]] + [ln for ln in lines[1:] if ln.startswith(" " * 10)][:4]  # the package's line and its follow-ups
    text = " ".join(own)
    assert re.search(rf"\b{path.stem}\b", text), f"the layout's tree does not name {rel} on the lines of {pkg.strip()}"


def test_every_docs_link_resolves():
    """Every relative link of the README and of docs/*.md points to a file that exists."""
    repo = PKG.parent
    pages = [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    assert len(pages) > 5
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(repo)} links to {target}, which is missing"


# A test fixture or the shipped sample may be a cut of a shared file, with its provenance; a file of the shared
# folder is never committed whole, however small.
WHOLE_COPY_BYTES = 0


@pytest.mark.needs_shared
def test_no_file_of_the_shared_folder_is_committed_whole(shared):
    import hashlib
    import subprocess

    repo = PKG.parent
    sums = {}
    for listing in (shared / "data/SHA256SUMS", shared / "tokenizers/SHA256SUMS"):
        for line in listing.read_text().splitlines():
            digest, name = line.split(maxsplit=1)
            sums[digest] = f"{listing.parent.name}/{name.lstrip('*./')}"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True).stdout.decode()
    copies = []
    for name in filter(None, tracked.split("\0")):
        path = repo / name
        if path.is_file() and path.stat().st_size > WHOLE_COPY_BYTES:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest in sums:
                copies.append(f"{name} = shared/{sums[digest]}")
    assert not copies, "whole copies of shared files (commit a cut with its provenance, or read ../shared):\n" + (
        "\n".join(copies)
    )


def test_the_readme_stays_within_250_lines():
    """The README is the front page: what to run, what it answers, where the rest lives (docs/); detail goes there."""
    lines = (PKG.parent / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_recorded_test_durations_name_only_files_that_exist():
    """``tests/durations.json`` orders the suite's files on the xdist workers (conftest.pytest_collection_modifyitems):
    a renamed or removed file is recorded again (``AZLLM_TEST_DURATIONS=tests/durations.json make test``)."""
    import json

    record = json.loads((TESTS / "durations.json").read_text())
    assert len(record) > 100 and all(s >= 0 for s in record.values())
    gone = [name for name in record if not (PKG.parent / name).is_file()]
    assert not gone, f"tests/durations.json names files that do not exist: {gone}; record it again"
