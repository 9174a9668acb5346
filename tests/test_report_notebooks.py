"""The notebooks are jupytext py:percent text paired with their .ipynb: the pairs agree, hold no outputs and no
logic (no functions or classes; short cells of library calls and what they show)."""

import ast
from pathlib import Path

import jupytext
import nbformat
import pytest

NB = Path(__file__).resolve().parent.parent / "notebooks"
TEXTS = sorted(NB.glob("*.py"))


def _cells(nb) -> list[tuple]:
    return [(c.cell_type, c.source.strip(), tuple(c.metadata.get("tags", []))) for c in nb.cells]


def test_every_notebook_has_a_text_twin():
    assert [p.stem for p in TEXTS] == sorted(p.stem for p in NB.glob("*.ipynb")) and len(TEXTS) >= 4


@pytest.mark.parametrize("text", TEXTS, ids=lambda p: p.stem)
def test_pair_is_in_sync(text):
    """Edit the .py, then `make notebooks` (jupytext --sync) refreshes the .ipynb."""
    want = jupytext.read(text)
    have = nbformat.read(str(text.with_suffix(".ipynb")), as_version=4)
    assert _cells(have) == _cells(want), f"{text.name} and its .ipynb differ: run `make notebooks`"
    assert have.metadata["jupytext"]["formats"] == "ipynb,py:percent"
    assert have.metadata["kernelspec"]["name"] == "azllm"


@pytest.mark.parametrize("text", TEXTS, ids=lambda p: p.stem)
def test_notebook_holds_no_logic_and_no_outputs(text):
    nb = nbformat.read(str(text.with_suffix(".ipynb")), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    for c in code:
        assert not c.get("outputs") and c.get("execution_count") is None
        lines = [ln for ln in c.source.splitlines() if ln.strip()]
        assert not any(ln.lstrip().startswith(("def ", "class ", "lambda")) for ln in lines), c.source
        # statements, not lines: ruff formats a long call one argument per line, which is no more logic
        n = sum(isinstance(node, ast.stmt) for node in ast.walk(ast.parse(c.source)))
        assert n <= 12, f"a section of {n} statements in {text.name}: move the logic into azllm"
