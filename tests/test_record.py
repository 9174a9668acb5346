"""azllm.record: the one typed record every renderer reads: what it keeps of metrics.json (every key the index's
answers read, nothing more), its schema version, and the committed records under docs/ read as they are."""

import ast
import inspect
import json
import textwrap

import pytest

from azllm import answers
from azllm.record import KEEP, SCHEMA_VERSION, differences, measures, read_record, run_record, section
from conftest import REPO


def test_a_record_keeps_where_it_came_from_and_only_what_is_read():
    doc = {
        "run": {"run_name": "r", "git_commit": "c0ffee0", "params_hash": "h", "time_utc": "t",
                "machine": {"processor": "x", "cpu_count": 2, "memory_gb": 24.0, "hostname": "not kept"}},
        "notebooks": [{"name": "09_preference", "seconds": 60.0, "status": "ok", "html": "09_preference.html"}],
        "artifacts": {"preference_export": "/a/export"},
        "metrics": {
            "preference": {"method": "dpo", "judgement": [{"measure": "preference accuracy (4 held-out pairs)"}],
                           "samples": ["not read by any renderer"]},
            "unknown_section": {"x": 1},
        },
    }  # fmt: skip
    rec = run_record(doc)
    assert rec["schema"] == SCHEMA_VERSION
    assert rec["run"]["machine"] == {"processor": "x", "cpu_count": 2, "memory_gb": 24.0}
    assert rec["notebooks"] == [{"name": "09_preference", "seconds": 60.0, "status": "ok"}]
    assert rec["preference"] == {"method": "dpo", "judgement": doc["metrics"]["preference"]["judgement"]}
    assert "unknown_section" not in rec and section(rec, "sft") == {}


def test_a_run_folder_a_metrics_file_and_a_record_file_read_alike(tmp_path):
    doc = {"run": {"run_name": "r", "git_commit": "c"}, "metrics": {"adapt": {"steps": 3}}, "notebooks": []}
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.json").write_text(json.dumps(doc))
    (tmp_path / "rec.json").write_text(json.dumps(run_record(doc)))
    assert read_record(tmp_path / "run") == read_record(tmp_path / "run" / "metrics.json") == run_record(doc)
    assert read_record(tmp_path / "rec.json") == run_record(doc)


def test_a_record_without_a_schema_is_version_1_and_a_newer_one_is_refused(tmp_path):
    old = {"run": {"run_name": "r"}, "sft": {"stages": []}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert read_record(tmp_path / "old.json") == {**old, "schema": 1}
    (tmp_path / "new.json").write_text(json.dumps({**old, "schema": SCHEMA_VERSION + 1}))
    with pytest.raises(ValueError, match=f"schema {SCHEMA_VERSION + 1}; this azllm reads up to {SCHEMA_VERSION}"):
        read_record(tmp_path / "new.json")


def _sections_read(fn) -> dict[str, set[str]]:
    """``{section: keys}`` that a function reads as ``section(m, "name").get("key")`` / ``section(m, "name")["key"]``
    or through a name bound to ``section(m, "name")``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    bound, out = {}, {}

    def name_of(node):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "section" and len(node.args) == 2:
            return node.args[1].value
        return bound.get(node.id) if isinstance(node, ast.Name) else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets[0].elts if isinstance(node.targets[0], ast.Tuple) else node.targets
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for t, v in zip(targets, values):
                if isinstance(t, ast.Name) and name_of(v):
                    bound[t.id] = name_of(v)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            owner, key = name_of(node.func.value), node.args[0] if node.args else None
        elif isinstance(node, ast.Subscript):
            owner, key = name_of(node.value), node.slice
        else:
            continue
        if owner and isinstance(key, ast.Constant):
            out.setdefault(owner, set()).add(key.value)
    return out


def test_the_record_keeps_every_key_the_index_answers_read():
    """Statically: each ``section(m, "x").get("key")`` of the answers is a key the record keeps, so the index answers
    from a record as from metrics.json."""
    helpers = [getattr(answers, n) for n in dir(answers) if n.startswith("_") and n.endswith(("_answer", "_answers"))]
    read: dict[str, set[str]] = {}
    for fn in helpers:
        for name, keys in _sections_read(fn).items():
            read.setdefault(name, set()).update(keys)
    assert {"corpus", "tokens_split", "tokenizers", "preference", "evaluate", "benchmark"} <= set(read)
    assert {name: sorted(keys - set(KEEP[name])) for name, keys in read.items() if keys - set(KEEP[name])} == {}


def test_the_committed_records_answer_as_a_run_folder_does():
    """Each study's committed record gives the index's answers of the pages it ran, with the record's numbers; the
    default report's gives the first pages'."""
    for name in ("smollm2_long", "smollm2"):
        rec = read_record(REPO / "docs" / f"{name}.json")
        said = {q: a for q, a, _, _ in answers.headline(rec)}
        pref = said["Does preference tuning help (held-out answers)"]
        rows = {r["measure"].split(" (")[0]: r for r in rec["preference"]["judgement"]}
        chrf, acc = rows["chrF++"], rows["preference accuracy"]
        assert pref.startswith(
            f"DPO: {chrf['measure']} {chrf['before']:.2f} → {chrf['after']:.2f} "
            f"({chrf['delta']:+.2f} ± {chrf['delta_se']:.2f}, {chrf['verdict']}); "
        ), (name, pref)
        assert f"{acc['measure']} {acc['after']:.3f}" in pref
        assert "Does instruction tuning help (held-out answers)" in said
    default = {q for q, _, _, _ in answers.headline(read_record(REPO / "docs" / "default.json"))}
    assert {"What the corpus stage kept", "Tokens per word", "Held-out bits per byte"} <= default


def test_two_runs_are_the_same_when_every_result_is_whatever_their_speed_and_row_order():
    """``differences``: a record against itself has none; its wall times, speeds, memory, paths and page times
    rewritten, and its rows of changes reversed, still none; one result moved by 1e-5 of itself, or dropped, is named
    with both values; a result the run alone holds (a field the record gained since) is not a difference."""
    import copy

    ref = read_record(REPO / "docs" / "default.json")
    assert len(measures(ref)) > 1000 and differences(ref, ref) == []
    run = copy.deepcopy(ref)
    run["run"]["git_commit"], run["artifacts"] = "another", {}
    run["notebooks"] = [{**n, "seconds": n["seconds"] * 2} for n in run["notebooks"]]
    run["train"]["tokens_per_s"] *= 3
    run["benchmark"]["variants"][0]["step_ms_median"] += 50
    run["evaluate"]["before_after"].reverse()
    run["adapt"]["new_field"] = {"x": 1.0}
    assert differences(run, ref) == []
    row = run["evaluate"]["before_after"][0]
    row["after"] *= 1 + 1e-5
    del run["train"]["final"]
    diffs = {k: (got, want) for k, got, want in differences(run, ref)}
    (key,) = [k for k in diffs if not k.startswith("train.final.")]
    assert key.startswith(f"evaluate.before_after.{row['task']}/") and key.endswith(".after")
    assert diffs[key][0] == row["after"] and len(diffs) > 1
    assert {got for k, (got, _) in diffs.items() if k != key} == {"<missing>"}
    assert differences(run, ref, rel_tol=1e-3) == [(k, "<missing>", w) for k, (_, w) in diffs.items() if k != key]


def test_results_same_as_exits_0_on_the_same_results_and_1_naming_each_difference(tmp_path, capsys):
    """``azllm results RUN --same-as RECORD``: the check that a run reproduces a record (exit 0), or each result
    that moved (exit 1)."""
    from azllm.cli import main

    rec = REPO / "docs" / "default.json"
    assert main(["results", str(rec), "--same-as", str(rec)]) == 0
    out = capsys.readouterr().out
    n = len(measures(read_record(rec)))
    assert f"{n:,} of {n:,} results the same within 1e-06" in out and "not the same machine" not in out
    doc = json.loads(rec.read_text(encoding="utf-8"))
    doc["train"]["final"]["val"]["bpb"] += 1e-3
    (tmp_path / "moved.json").write_text(json.dumps(doc), encoding="utf-8")
    assert main(["results", str(tmp_path / "moved.json"), "--same-as", str(rec)]) == 1
    assert f"train.final.val.bpb: {doc['train']['final']['val']['bpb']!r}" in capsys.readouterr().out
    assert main(["results", str(tmp_path / "moved.json"), "--same-as", str(rec), "--tolerance", "1e-2"]) == 0
