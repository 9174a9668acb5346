"""The index's answers (azllm.answers): every stage answered from the numbers its page records, every key read is
one a recipe writes, nothing computed or chosen here."""

from pathlib import Path

from azllm import answers
from azllm.answers import headline

REPO = Path(__file__).resolve().parent.parent


def test_the_index_answers_the_study_beside_its_reference_points():
    """The answers are read from the parts the notebooks record (the recipes' results, as in metrics.json): every
    number and every winner is read, none computed or chosen here; a part a run did not produce is left out."""

    extend = {
        "way": "extend",
        "method": "lora",
        "az_bpb_before": 3.1,
        "az_bpb_after": 2.2,
        "en_bpb_before": 1.5,
        "en_bpb_after": 1.6,
        "en_bpb_change": 0.1,
    }
    metrics = {
        "tokenizers": {
            "best": "bpe-32k",
            "best_fertility_by_set": {"flores": 1.44, "xwmt": 1.52},
            "reference_fertility": {"llama3": 3.41, "aztc-32k": 1.467},
        },
        "train": {
            "final": {"val": {"bpb": 2.4, "uniform_bpb": 4.0}, "flores": {"bpb": 2.37, "uniform_bpb": 3.1}},
            "tokenizer_vocab": 8192,
            "train_bytes_per_token": 3.25,
        },
        "adapt": {"runs": [{**extend, "way": "keep", "method": "full", "az_bpb_after": 2.5}, extend], "best": extend},
        "benchmark": {
            "variants": [
                {"variant": "baseline", "status": "ok", "speed_ratio": 1.0, "memory_ratio": 1.0},
                {"variant": "liger", "status": "unavailable", "speed_ratio": None},
            ],
            "fastest_variant": "baseline",
            "cost": [{"variant": "baseline", "usd_per_billion_tokens": 1234.0, "price_per_hour": 3.5}],
            "cheapest_variant": "baseline",
        },
        "evaluate": {
            "az_headline": "sib200_az_probe",
            "en_headline": "sib200_en_probe",
            "top": {
                "way": "swap",
                "method": "full",
                "az_gain": 0.12,
                "az_gain_se": 0.03,
                "az_verdict": "gain",
                "en_change": -0.05,
                "en_verdict": "within noise",
            },
        },
    }
    rows = {q: (a, ref, page) for q, a, ref, page in headline(metrics)}
    assert rows["Most Azerbaijani per device-hour (downstream)"][0] == (
        "swap / full: sib200_az_probe +0.120 ± 0.030 (gain); English sib200_en_probe -0.050 (within noise)"
    )
    assert rows["Tokens per word"] == (
        "bpe-32k: flores 1.440, xwmt 1.520",
        "llama3 3.410, aztc-32k 1.467",
        "01_tokenizers.html",
    )
    assert rows["Held-out bits per byte"][0] == "val 2.400, flores 2.370"
    # each set's own baseline (the training text's bytes per token would give 13 / 3.25 = 4.000 for both)
    assert (
        rows["Held-out bits per byte"][1]
        == "a uniform guess over the vocabulary on the same sets: val 4.000, flores 3.100"
    )
    assert rows["Adaptation that wins (Azerbaijani bpb)"][0].startswith("extend / lora: 3.100 → 2.200")
    assert "(+0.100)" in rows["Adaptation that wins (Azerbaijani bpb)"][0]
    # liger did not run; the winner is the recipe's
    assert rows["Speed × and memory × of each technique"][0] == "baseline 1.00 / 1.00 (fastest: baseline)"
    assert rows["$ per billion tokens"][0] == "baseline $1,234 (cheapest: baseline)"
    assert headline({}) == []
    # every task that moved beyond the noise follows the headline, or the answer says that none did
    up = {"task": "flores_en_az", "way": "extend", "method": "lora", "delta": 1.947, "delta_se": 0.731}
    up["verdict"] = "gain"
    metrics["evaluate"]["moved"] = {"base_at_chance": False, "az": [up], "en": []}
    answer = dict((q, a) for q, a, _, _ in headline(metrics))["Most Azerbaijani per device-hour (downstream)"]
    assert answer.endswith("(within noise); beyond the noise: extend / lora flores_en_az +1.95 ± 0.73 (gain)")
    metrics["evaluate"]["moved"] = {"base_at_chance": False, "az": [], "en": []}
    answer = dict((q, a) for q, a, _, _ in headline(metrics))["Most Azerbaijani per device-hour (downstream)"]
    assert answer.endswith("(within noise); no task beyond the noise")
    # a base at chance on every multiple-choice task: the answer says so and points to the real base's run
    for moved in ({"base_at_chance": True}, {"base_at_chance": False, "stand_in": True}):
        metrics["evaluate"]["moved"] = moved
        answer = dict((q, a) for q, a, _, _ in headline(metrics))["Most Azerbaijani per device-hour (downstream)"]
        assert answer.startswith("none here: this base is a stand-in") and "smollm2.yaml" in answer


def _keys_read(fn) -> set[str]:
    """The constant keys a function reads: ``x["key"]`` and ``x.get("key")``."""
    import ast
    import inspect
    import textwrap

    keys = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(fn)))):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            keys.add(node.slice.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            keys.add(node.args[0].value)
    return {k for k in keys if isinstance(k, str)}


def _keys_written() -> set[str]:
    """The constant keys the recipes and the library write (dict literals, ``dict(key=...)`` / ``.update(key=...)``,
    ``x["key"] = ...``) and the sections and keys the notebooks record (``report.record(out_dir, "section", {...})``):
    never the presentation (tables, answers, results, plots, report), the record or the command line."""
    import ast

    pkg = REPO / "azllm"
    presentation = {
        pkg / f
        for f in (
            "tables.py",
            "tokenizer_tables.py",
            "benchmark_tables.py",
            "answers.py",
            "results.py",
            "record.py",
            "plots.py",
            "report.py",
            "cli.py",
            "cli_bench.py",
            "__main__.py",
        )
    }
    keys: set[str] = set()
    for path in [p for p in sorted(pkg.rglob("*.py")) if p not in presentation] + sorted(REPO.glob("notebooks/*.py")):
        notebook = path.parent.name == "notebooks"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict) and not notebook:
                keys.update(k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
            elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if name in ("dict", "update") and not notebook:
                    keys.update(k.arg for k in node.keywords if k.arg)
                if name == "record" and notebook and len(node.args) == 3:
                    section, values = node.args[1], node.args[2]
                    keys.add(section.value if isinstance(section, ast.Constant) else "")
                    if isinstance(values, ast.Dict):
                        keys.update(k.value for k in values.keys if isinstance(k, ast.Constant))
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and not notebook:
                if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    keys.add(node.slice.value)
    return keys


def test_every_key_the_index_reads_is_written_by_a_recipe():
    """Statically: each key the index's answers read (answers.headline and its helpers) is a key that a recipe (or
    the library a recipe returns from) writes, or a section / key a notebook records; a display label such as
    "speed ×" or "az bpb after" (which the index once read back from rows the tables had labelled) is not."""
    helpers = (
        answers._tokenizer_answer,
        answers._bpb_answer,
        answers._adapt_answer,
        answers._eval_answer,
        answers._distill_answer,
        answers._technique_answers,
    )
    read = set().union(*map(_keys_read, helpers))
    assert {"best", "final", "uniform_bpb", "az_bpb_after", "top", "speed_ratio", "fastest_variant"} <= read
    written = _keys_written()
    assert not {"speed ×", "az bpb after", "$ per 1B tokens", "price/h"} & written  # labels are written nowhere
    assert read - written == set()


def test_every_stage_has_its_answer_on_the_index():
    """One answer per notebook (conftest.ANSWERED_BY, which every notebook test checks against the index it
    renders); the corpus, token-file and instruction-tuning rows read the numbers their pages record."""
    from conftest import ANSWERED_BY

    assert set(ANSWERED_BY) == {p.stem for p in (REPO / "notebooks").glob("*.ipynb")}
    metrics = {
        "corpus": {
            "counts": {"by_source": {"total": {"input_bytes": 27_000_000, "kept_bytes": 21_600_000, "kept_docs": 5}}},
            "mix": [{"mix_mb": 10.0, "dropped_sentences_pct": 2.5}, {"mix_mb": 2.5, "dropped_sentences_pct": 0.5}],
            "sentence_filter": {"false_positive": 2e-5},
        },
        "tokens_split": {"train_tokens": 1_000_000, "val_tokens": 10_000, "val_share_of_docs": 0.01},
        "tokens_benchmark": {"ratios": {"c_over_limit_1x": 0.93}},
        "sft": {
            "chrf_before_after": {
                "n": 24,
                "before": 9.14,
                "after": 7.37,
                "delta": -1.77,
                "delta_se": 0.83,
                "verdict": "loss",
            },
            "tasks_before_after": [
                {"task": "sib200_az", "delta": 0.128, "verdict": "gain"},
                {"task": "tumlu_az", "delta": 0.01, "verdict": "within noise"},
            ],
        },
    }
    rows = {q: a for q, a, _, _ in headline(metrics)}
    assert rows["What the corpus stage kept"] == (
        "21.6 of 27.0 MB (80.0%), 5 documents; the mix: 12.5 MB; near-duplicate sentences dropped in the mix: up "
        "to 2.5% of a source (filter false-positive rate 2.0e-05)"
    )
    assert rows["Token files"] == (
        "1,000,000 training and 10,000 validation tokens (1.0% of the documents held out); the encoder at 0.93× "
        "the tokenizer's own batch encode"
    )
    assert rows["Does instruction tuning help (held-out answers)"] == (
        "chrF++ of 24 held-out answers 9.14 → 7.37 (-1.77 ± 0.83, loss); beyond the noise on the tasks: "
        "sib200_az +0.128 (gain)"
    )
    metrics["sft"]["stages"] = [
        {"model": "original base", "chrf": 10.0, "delta": None, "loop_share": 0.25},
        {"model": "adapted", "chrf": 9.0, "delta": -1.0, "delta_se": 0.5, "verdict": "within noise", "mde": 1.4,
         "loop_share": 0.0},
        {"model": "SFT only", "chrf": 12.0, "delta": 2.0, "delta_se": 0.5, "verdict": "gain", "mde": 1.4,
         "loop_share": 0.0},
    ]  # fmt: skip
    rows = {q: a for q, a, _, _ in headline(metrics)}
    assert rows["Does instruction tuning help (held-out answers)"].endswith(
        "; against the original base (chrF++ 10.00, loop rate 25%): adapted -1.00 ± 0.50 (within noise, MDE 1.40, "
        "loop rate 0%), SFT only +2.00 ± 0.50 (gain, MDE 1.40, loop rate 0%)"
    )
    metrics["sft"]["stages"] = metrics["sft"]["stages"][1:]  # no controls: the two stages are the line above
    assert (
        "against" not in {q: a for q, a, _, _ in headline(metrics)}["Does instruction tuning help (held-out answers)"]
    )
