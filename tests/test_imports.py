"""The direction of every import inside the package, read from the source (AST), function-level imports included:
no import cycle between azllm's modules, and no arrow from the library up into the recipes, the presentation
(tables, plots, report) or the command line. Layers, bottom up:

- ``library``: every module but those below (text, data, tokenizer, ..., train, assemble, bench/*, corpus/*);
- ``config``: the typed params (the library never reads them);
- ``recipes``: ``azllm/recipes/*`` (read the config, call the library);
- ``presentation``: ``tables``, ``tokenizer_tables``, ``benchmark_tables``, ``answers``, ``results``, ``plots``,
  ``report``;
- ``cli``: ``cli``, ``cli_bench``, ``__main__``.

An arrow may only point to the same layer or a lower one (the library may not import the config either).
"""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "azllm"
LAYERS = {"library": 0, "config": 1, "recipes": 2, "presentation": 3, "cli": 4}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def layer(mod: str) -> str:
    rest = mod.split(".")[1:]
    if not rest:
        return "library"
    if rest[0] == "config":
        return "config"
    if rest[0] == "recipes":
        return "recipes"
    if rest[0] in ("tables", "tokenizer_tables", "benchmark_tables", "answers", "results", "plots", "report"):
        return "presentation"
    if rest[0] in ("cli", "cli_bench", "__main__"):
        return "cli"
    return "library"


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> list[str]:
    """The azllm modules an ``ImportFrom`` names (``from . import x`` -> the submodule ``pkg.x`` when it is one)."""
    if node.level == 0:
        base = node.module or ""
    else:
        here = mod.split(".") if is_pkg else mod.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join(here + ([node.module] if node.module else []))
    if not base.startswith("azllm"):
        return []
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in MODULES else base)
    return out


def imports_of(mod: str) -> set[str]:
    """Every azllm module that ``mod`` imports anywhere in its source (module level and inside functions)."""
    path = MODULES[mod]
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("azllm"))
        elif isinstance(node, ast.ImportFrom):
            out.update(_resolve(mod, path.name == "__init__.py", node))
    out = {m if m in MODULES else _owner(m) for m in out}
    out.discard(mod)
    return {m for m in out if m}


def _owner(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


GRAPH = {m: imports_of(m) for m in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each a cycle of imports.

    A package's ``__init__`` that re-exports its submodules and a submodule importing a sibling through the package
    are not counted: Python imports the package first anyway, so the arrow submodule -> its own package is dropped.
    """
    g = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_function_level_imports():
    """The reader finds imports inside functions (the kind that hid the old cycle): assemble imports lora there."""
    assert "azllm.lora" in GRAPH["azllm.assemble"] and "azllm.model" in GRAPH["azllm.assemble"]
    assert "azllm.report" in GRAPH["azllm.cli"]


def test_a_planted_cycle_is_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle():
    assert _cycles(GRAPH) == []


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_no_arrow_up(mod):
    up = sorted(
        d
        for d in GRAPH[mod]
        if LAYERS[layer(d)] > LAYERS[layer(mod)] or (layer(mod) == "library" and layer(d) == "config")
    )
    assert not up, f"{mod} ({layer(mod)}) imports {up} from a higher layer"


IMPORT_DEEPSPEED = """
import sys
import azllm
assert "IPython" not in sys.modules, "IPython"
from azllm.gguf import gguf_to_folder
import deepspeed
assert "mlflow" not in sys.modules, "mlflow"
"""


def test_importing_azllm_prints_nothing():
    """``from azllm.gguf import gguf_to_folder`` (and the DeepSpeed import every Trainer and ``save_pretrained``
    makes) writes nothing on stdout or stderr: DeepSpeed's "Setting accelerator to CPU" guess is dropped. Outside
    Jupyter, ``import azllm`` imports no IPython (0.07-0.27 s) to learn that it is not in a kernel, and the DeepSpeed
    import brings in no mlflow, whose import cost each Trainer's process ~0.75 s (requirements-sagemaker.lock
    leaves it out)."""
    import subprocess
    import sys

    env = {k: v for k, v in __import__("os").environ.items() if k not in ("DS_ACCELERATOR", "AZLLM_LOG")}
    r = subprocess.run(
        [sys.executable, "-c", IMPORT_DEEPSPEED],
        capture_output=True,
        text=True,
        env=env,
        cwd=PKG.parent,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "Setting accelerator" not in r.stdout + r.stderr
    assert r.stdout == "" and r.stderr == "", (r.stdout, r.stderr)


# Which recipe may import which: the stages in their order (a later stage reads an earlier one's results), the shared
# helpers (paths, sources, specs) below them all. A new arrow is a decision: add it here with the stage it serves.
RECIPE_IMPORTS = {
    "paths": set(),
    "specs": set(),
    "sources": {"paths"},
    "tasks": {"paths", "sources"},
    "corpus": {"paths", "sources", "stages", "tasks"},
    "tokenizers": {"corpus", "paths", "sources", "stages"},
    "tokens": {"corpus", "paths", "sources", "tokenizers"},
    "train": {"paths", "specs", "tokens"},
    "benchmark": {"adapt", "paths", "sources", "specs", "tokens", "train"},
    "adapt": {"paths", "sources", "stages", "tokenizers", "tokens", "train"},
    "evaluate": {"adapt", "corpus", "paths", "sources", "tasks"},
    "judge": {"paths"},  # the held-out answers and their judgement, the same for every stage that answers
    "stages": {"paths"},  # the markers a later stage finds its input by; builders by name (importlib), not import
    "conversations": {"sources", "tasks"},  # a run's conversations: the draws, the decontamination, their rows
    "sft": {"adapt", "conversations", "evaluate", "judge", "paths", "sources", "specs", "stages", "tasks"},
    "distill": {"adapt", "evaluate", "paths", "sources", "specs", "stages", "tokens", "train"},
    "deploy": {"adapt", "conversations", "evaluate", "paths", "sft", "sources", "stages"},
    # the cycle's last model against the original base: the controls' answers, the pages' scores, read back
    "prefer": {"controls", "conversations", "evaluate", "judge", "paths", "sft", "sources", "specs", "stages"},
    "sweep": {"prefer"},  # one stage's command per variant, as ``azllm run`` runs the pages
    "controls": {"adapt", "conversations", "judge", "sft"},
    "scale": {"corpus", "paths", "sources", "tokenizers", "tokens"},
    "launch": {"paths"},
    "publish": {"deploy", "paths", "prefer", "sources"},  # GGUF files made when missing; a DPO job's judgement
}


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if m.startswith("azllm.recipes.")))
def test_recipe_imports_are_the_listed_ones(mod):
    name = mod.split(".")[-1]
    assert name in RECIPE_IMPORTS, f"{mod} is a new recipe: list what it may import in RECIPE_IMPORTS"
    used = {d.split(".")[-1] for d in GRAPH[mod] if d.startswith("azllm.recipes.")}
    assert used <= RECIPE_IMPORTS[name], f"{mod} imports {sorted(used - RECIPE_IMPORTS[name])}, not listed"


def test_no_module_reaches_into_another_modules_private_names():
    """A name with a leading underscore is its module's own: no azllm module imports one from another azllm module
    (``from .adapt import _derived``) or reads one as an attribute (``adapt._derived``); what modules share is a
    public, named seam. (Private names of other packages are outside this rule.)"""
    found = []
    for mod, path in MODULES.items():
        tree = ast.parse(path.read_text())
        aliases = {}  # names bound to azllm modules in this file
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                targets = _resolve(mod, path.name == "__init__.py", node)
                for alias, target in zip(node.names, targets):
                    if target in MODULES and target.endswith("." + alias.name):
                        aliases[alias.asname or alias.name] = target
                    elif alias.name.startswith("_") and not alias.name.startswith("__") and target != mod:
                        found.append(f"{mod} imports {target}.{alias.name}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{mod} reads {aliases[node.value.id]}.{node.attr}")
    assert not found, "\n".join(sorted(set(found)))
