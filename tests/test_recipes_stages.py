"""azllm.recipes.stages: a finished stage's output found by its marker, for the same params only, while the output
is complete; preference tuning takes this run's SFT export from it without running SFT."""

import ast
from pathlib import Path

import pytest

from azllm.config import load_params
from azllm.recipes import prefer, sft, stages


def _cfg(tmp_path, monkeypatch, **over):
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    return load_params(None, overrides={"run_name": "stages", **over})


def _model_folder(where):
    where.mkdir(parents=True)
    (where / "config.json").write_text("{}")
    return where


def test_a_marked_output_is_found_for_the_same_params_while_complete(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path, monkeypatch)
    assert stages.finished(cfg, "sft") is None
    folder = _model_folder(tmp_path / "export")
    path = stages.mark(cfg, "sft", folder, results="r.json")
    assert path.name == "sft.json" and path.parent.name == "stages"
    got = stages.finished(cfg, "sft")
    assert got["artifact"] == str(folder.resolve()) and got["results"] == "r.json"
    assert stages.finished(_cfg(tmp_path, monkeypatch, seed=7), "sft") is None  # other params: not theirs
    (folder / "config.json").unlink()
    assert stages.finished(cfg, "sft") is None  # incomplete
    with pytest.raises(ValueError, match="unknown stage 'sfft'"):
        stages.finished(cfg, "sfft")


def test_preference_tuning_takes_the_marked_sft_export_without_running_sft(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path, monkeypatch)
    folder = _model_folder(tmp_path / "sft-export")
    stages.mark(cfg, "sft", folder)

    def no(*a, **k):
        raise AssertionError("SFT ran although its export was marked")

    monkeypatch.setattr("azllm.recipes.sft.sft_output", no)
    said = []
    assert prefer.preference_base(cfg, show=said.append) == str(folder.resolve())
    assert "found" in said[0]
    (folder / "config.json").unlink()
    with pytest.raises(AssertionError, match="SFT ran"):
        prefer.preference_base(cfg, show=said.append)


def test_a_missing_output_is_built_once_through_the_stages_builder(tmp_path, monkeypatch):
    cfg, calls = _cfg(tmp_path, monkeypatch), []

    def adapted_base(cfg, show):
        calls.append(show)
        stages.mark(cfg, "adapt", _model_folder(tmp_path / "adapted"), note={"how": "the test's"})

    monkeypatch.setattr("azllm.recipes.adapt.adapted_base", adapted_base)
    said = []
    base, note = sft.base_folder(cfg, show=said.append)
    assert len(calls) == 1 and base == str((tmp_path / "adapted").resolve()) and note["how"] == "the test's"
    assert "building it (azllm.recipes.adapt.adapted_base)" in said[0]
    assert sft.base_folder(cfg) == (base, {**note}) and len(calls) == 1  # the marker, not a second build
    monkeypatch.setattr("azllm.recipes.sft.sft_output", lambda cfg, show: None)
    with pytest.raises(stages.StageError, match="sft stage finished without its output .the SFT run and its export"):
        stages.require(cfg, "sft")
    with pytest.raises(ValueError, match="'evaluate' has no builder"):
        stages.require(cfg, "evaluate")


# ------------------------------------------------------------------------------------- the call graph of the recipes

RECIPES = Path(stages.__file__).parent
COMMANDS = {
    "corpus.run_corpus": "corpus",
    "corpus.corpus_output": "corpus",
    "tokenizers.main_tokenizer": "tokenizers",
    "tokenizers.train_tokenizers": "tokenizers",
    "tokens.prepare": "tokens",
    "tokens.prepare_once": "tokens",
    "train.train_job": "train",
    "adapt.adapted_base": "adapt",
    "sft.sft_command": "sft",
    "sft.sft_output": "sft",
    "prefer.prefer_command": "preference",
    "sweep.sweep_command": "preference",
    "distill.run_distill": "distill",
    "deploy.run_deploy": "deploy",
    "evaluate.evaluate_model": "evaluate",
}
"""Every stage's commands and builders (``{function: stage}``; a notebook's or ``azllm``'s entry): each reaches another
stage's output only through :func:`stages.require`. ``train.train_model`` and ``tokens.prepare_data`` are not
commands: they train one given config on given data, and make a config's token files, for any stage (adaptation's
runs, the distilled students, the benchmarks) and take the tokenizer and the corpus through ``require``."""


def call_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """``{"module.function": {"module.function", ...}}``: every top-level function of ``sources`` (``{module name:
    source}``, one package) and the package functions it names (a call, or a function passed on), resolved through
    its module's relative imports (``from .m import f``, ``from . import m``; in a function too)."""
    trees = {m: ast.parse(src) for m, src in sources.items()}
    graph = {}
    for mod, tree in trees.items():
        names, modules = {}, {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                for a in node.names:
                    if node.module:
                        names[a.asname or a.name] = f"{node.module}.{a.name}"
                    else:
                        modules[a.asname or a.name] = a.name
        own = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}
        for f in tree.body:
            if not isinstance(f, ast.FunctionDef):
                continue
            out = set()
            for node in ast.walk(f):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    if node.id in own and node.id != f.name:
                        out.add(f"{mod}.{node.id}")
                    elif node.id in names:
                        out.add(names[node.id])
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                    out.add(f"{modules[node.value.id]}.{node.attr}")
            graph[f"{mod}.{f.name}"] = out
    return graph


def reached(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """``{function: the function that named it first}`` of everything ``start`` reaches."""
    seen, todo = {start: ""}, [start]
    while todo:
        f = todo.pop()
        for g in sorted(graph.get(f, ())):
            if g not in seen:
                seen[g] = f
                todo.append(g)
    return seen


def _path(seen: dict[str, str], end: str) -> str:
    out = [end]
    while seen[out[-1]]:
        out.append(seen[out[-1]])
    return " <- ".join(out)


def test_no_stage_command_calls_another_stages_command():
    graph = call_graph({p.stem: p.read_text(encoding="utf-8") for p in RECIPES.glob("*.py")})
    assert set(COMMANDS) <= set(graph), "a command named here is gone: update COMMANDS"
    assert {f"{m.rsplit('.', 1)[1]}.{f}": s for s, (m, f, _) in stages.BUILDERS.items()}.items() <= COMMANDS.items()
    for command, stage in COMMANDS.items():
        seen = reached(graph, command)
        others = [c for c, s in COMMANDS.items() if s != stage and c in seen]
        assert not others, f"the {stage} command reaches {others}: " + "; ".join(_path(seen, c) for c in others)
    assert "stages.require" in reached(graph, "prefer.prefer_command")  # the one way to another stage's output
    assert "stages.require" in reached(graph, "sft.sft_command")
    assert "stages.require" in reached(graph, "tokens.prepare")
    assert "stages.require" in reached(graph, "train.train_job")


def test_the_call_graph_sees_calls_through_imports_in_functions_and_modules():
    sources = {
        "a": "from . import b\ndef one():\n    return b.two()\n",
        "b": "def two():\n    from .c import three\n    return map(three, [])\n",
        "c": "from .a import one\ndef three(x):\n    return four()\ndef four():\n    return 1\n",
    }
    graph = call_graph(sources)
    assert graph == {"a.one": {"b.two"}, "b.two": {"c.three"}, "c.three": {"c.four"}, "c.four": set()}
    assert _path(reached(graph, "a.one"), "c.four") == "c.four <- c.three <- b.two <- a.one"
