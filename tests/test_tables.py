"""Tables of the reports (azllm.tables): they rename the recipes' keys into display labels, choose columns and
format; they compute nothing. The source of tables.py is read and holds no arithmetic; the labels live there only;
the tables of real recipe rows carry the recipes' numbers unchanged."""

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

from azllm import answers, benchmark_tables, report, tables, tokenizer_tables

AZLLM = Path(tables.__file__).resolve().parent

ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult)
NUMERIC_CALLS = {"sum", "abs", "min", "max", "divmod", "pow"}
NUMERIC_METHODS = {
    "sum",
    "mean",
    "median",
    "abs",
    "max",
    "min",
    "div",
    "truediv",
    "floordiv",
    "mul",
    "sub",
    "add",
    "pow",
    "cumsum",
    "cumprod",
    "diff",
    "pct_change",
    "prod",
    "std",
    "var",
    "quantile",
    "nlargest",
    "nsmallest",
    "idxmax",
    "idxmin",
}
NUMERIC_MODULES = {"math", "statistics", "numpy", "decimal", "fractions", "operator"}


def _is_text(node) -> bool:
    """A str expression by its form: a str literal, an f-string, a concatenation with one, a choice between two,
    ``"sep".join(...)``, ``str(...)``."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_text(node.left) or _is_text(node.right)
    if isinstance(node, ast.IfExp):
        return _is_text(node.body) and _is_text(node.orelse)
    if isinstance(node, ast.Call):
        f = node.func
        return (isinstance(f, ast.Name) and f.id == "str") or (
            isinstance(f, ast.Attribute) and f.attr == "join" and _is_text(f.value)
        )
    return False


def arithmetic(source: str) -> list[str]:
    """Every arithmetic operation in ``source``, as ``"line: code"``: a binary operator on numbers (``+`` only
    when neither side is text by its form), an augmented assignment that is not a text concatenation, a unary minus
    or plus on anything but a literal, a call of ``sum``/``abs``/``min``/``max``..., a pandas/numpy reduction or
    arithmetic method (``.mean()``, ``.div()``...), an import of a numeric module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        bad = False
        if isinstance(node, ast.BinOp) and isinstance(node.op, ARITHMETIC):
            bad = not (isinstance(node.op, ast.Add) and _is_text(node))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ARITHMETIC):
            bad = not (isinstance(node.op, ast.Add) and _is_text(node.value))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            bad = not isinstance(node.operand, ast.Constant)
        elif isinstance(node, ast.Call):
            f = node.func
            bad = (isinstance(f, ast.Name) and f.id in NUMERIC_CALLS) or (
                isinstance(f, ast.Attribute) and f.attr in NUMERIC_METHODS
            )
        elif isinstance(node, ast.Import):
            bad = any(a.name.split(".")[0] in NUMERIC_MODULES for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            bad = (node.module or "").split(".")[0] in NUMERIC_MODULES
        if bad:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize(
    "code",
    [
        "x = a / b",
        "x = r['tokens'] - r['base']",
        "x = st and st * 1e3",
        "x = n // 2",
        "x = n % 3",
        "x = n ** 2",
        "x = a @ b",
        "x = a + b",  # two numbers as far as the form says
        "x = (a + b) + 'x'",  # the inner sum is arithmetic
        "x = -r['slope']",
        "x = f'{a / b:.2f}'",  # inside an f-string's braces, still arithmetic
        "total += n",
        "xs += [1]",
        "x = sum(xs)",
        "x = max(a, b)",
        "x = abs(a - 1)",
        "x = df['speed'].mean()",
        "x = (df['pred'] - 1).abs().max()",
        "x = df.div(base)",
        "import statistics",
        "from math import log",
        "import numpy as np",
    ],
)
def test_the_arithmetic_finder_finds_planted_arithmetic(code):
    assert arithmetic(code), code


@pytest.mark.parametrize(
    "code",
    [
        "x = 'a' + b",
        "x = f'{a:.2f}' + ', '.join(xs) + '.'",
        "x = r['status'] + ': ' + note",
        "s += f'{x}'",
        "s += 'a' if c else 'b'",
        "x = str(n) + 'x'",
        "x = -1",
        "x = df.round(3)",
        "x = f'{a:.2%}'",
        "x = len(rows)",
    ],
)
def test_the_arithmetic_finder_passes_text(code):
    assert not arithmetic(code), code


def test_tables_does_no_arithmetic():
    """tables.py renames, chooses columns and formats: every number it shows was computed by a recipe."""
    source = Path(tables.__file__).read_text()
    tree = ast.parse(source)
    functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert set(tables.__all__) - set(functions) <= {"LABELS", "ENCODER_LABELS", "VERDICT_MARK", "ALSO_SHOWN"}
    assert len(functions) >= 30  # the module as it is, not an empty parse
    texts = [n for n in ast.walk(tree) if isinstance(n, ast.BinOp) and _is_text(n)]
    assert texts  # the walk reaches the functions' bodies (their text concatenations)
    assert arithmetic(source) == []
    for module in (benchmark_tables, tokenizer_tables):  # the tables split out of it, by concept
        assert arithmetic(Path(module.__file__).read_text()) == [], module.__name__


def test_the_index_answers_do_no_arithmetic():
    """The index reads the recipes' numbers and winners: its answer helpers format, they compute nothing."""
    helpers = [
        answers.headline,
        answers._tokenizer_answer,
        answers._bpb_answer,
        answers._adapt_answer,
        answers._eval_answer,
        answers._technique_answers,
        answers._f,
    ]
    for f in helpers:
        assert arithmetic(textwrap.dedent(inspect.getsource(f))) == [], f.__name__


def test_display_labels_live_in_tables_only():
    """No display label (a value of tables.LABELS that is not a snake_case key) is a key in what the recipes or the
    report write: the recipes write snake_case keys, tables renames them."""
    labels = {v for v in tables.LABELS.values() if not report.SNAKE_CASE.match(v)}
    assert "speed ×" in labels and "$ per 1B tokens" in labels
    for path in sorted((AZLLM / "recipes").glob("*.py")) + [AZLLM / "report.py", AZLLM / "answers.py"]:
        keys = {
            k.value
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Dict)
            for k in node.keys
            if isinstance(k, ast.Constant) and isinstance(k.value, str)
        }
        assert not keys & labels, f"{path.name} writes display labels {sorted(keys & labels)}"


def test_records_turn_nan_into_none():
    import pandas as pd

    assert tables.records(pd.DataFrame([{"a": float("nan"), "b": 1.0}])) == [{"a": None, "b": 1.0}]


def test_encoder_table_labels_its_columns():
    enc = tables.encoder_table([{"variant": "c", "scale": 10, "mtokens_per_s": 1.5, "vs_a": None}])
    assert enc.loc[0, "variant"] == "(c) azllm encode_corpus" and enc.loc[0, "scale"] == "10x"
    assert enc.loc[0, "Mtokens/s"] == 1.5


def test_samples_table_puts_the_base_answer_beside_the_trained_one():
    rows = [
        {
            "instruction": "Salam?",
            "before_answer": "Hello!",
            "before_chrf": 5.0,
            "answer": "Salam!",
            "chrf": 40.0,
            "reference": "Salam.",
        }
    ]
    assert tables.samples_table(rows).iloc[0].to_dict() == {
        "instruction": "Salam?",
        "before SFT": "Hello!",
        "chrF++ before": 5.0,
        "answer": "Salam!",
        "chrF++": 40.0,
        "reference": "Salam.",
    }


def test_pair_sentence_names_only_changes_beyond_the_noise():
    rows = [
        {
            "task": "sib200_az",
            "language": "az",
            "before": 0.2,
            "after": 0.4,
            "delta": 0.2,
            "delta_se": 0.05,
            "verdict": "gain",
        },
        {
            "task": "sib200_en",
            "language": "en",
            "before": 0.5,
            "after": 0.45,
            "delta": -0.05,
            "delta_se": 0.05,
            "verdict": "within noise",
        },
    ]
    s = tables.pair_sentence(rows)
    assert s == (
        "Azerbaijani beyond 1.96 standard errors: sib200_az 0.200 → 0.400 (+0.200 ± 0.050). "
        "No English measure moves beyond 1.96 standard errors."
    )
