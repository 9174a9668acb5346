"""Tiny helper to write a notebook from a list of ("md"|"code", source) cells, without outputs."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

PARAMS_CELL = 'params_file = "params/tiny.yaml"\nout_dir = "reports/tiny"'


def write(path: str | Path, cells: list[tuple[str, str]]) -> None:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "azllm", "display_name": "Python (azllm)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, src in cells:
        src = src.strip("\n")
        if kind == "md":
            nb.cells.append(new_markdown_cell(src))
        elif kind == "params":
            nb.cells.append(new_code_cell(src, metadata={"tags": ["parameters"]}))
        else:
            nb.cells.append(new_code_cell(src))
    for i, c in enumerate(nb.cells):  # stable ids: regenerating gives the same file
        c["id"] = f"cell-{i:02d}"
    nbformat.write(nb, str(path))
