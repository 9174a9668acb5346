"""The evaluation data readers (azllm.evaluation.datasets): every benchmark's format, a test split written in the
dev split's format, and each bad input with a message that names the file."""

import json
import re

import pytest

from azllm.evaluation.datasets import (
    EvalDataError,
    read_mmlu,
    read_parallel,
    read_sib200,
    read_tumlu,
    split_files,
    task_texts,
)
from conftest import FIXTURES

EV = FIXTURES / "data"
# SIB-200's label order, as the shipped task YAML gives it (its labels.txt is not copied into the fixtures)
_TASK = (FIXTURES.parents[1] / "azllm/evaluation/tasks/sib200_az.yaml").read_text()
LABELS = [x.strip() for x in re.search(r"labels: \[(.*)\]", _TASK).group(1).split(",")]


def test_sib200_rows_are_line_parallel_across_languages():
    az = read_sib200(EV / "az/eval/sib200/azj_Latn/dev.tsv", LABELS)
    en = read_sib200(EV / "az/eval/sib200/eng_Latn/dev.tsv", LABELS)
    assert len(az) == len(en) == 14 and [r["id"] for r in az] == [r["id"] for r in en]
    assert [r["label"] for r in az] == [r["label"] for r in en] and all(r["text"] for r in az)


def test_tumlu_mmlu_and_flores_read_their_release_formats():
    t = read_tumlu(EV / "az/eval/tumlu/dev")
    assert len(t) == 14 and len({r["subject"] for r in t}) == 7
    assert all(0 <= r["answer"] < len(r["choices"]) and r["cot"] for r in t)
    assert len(read_tumlu(EV / "az/eval/tumlu/dev", ["History"])) == 2
    m = read_mmlu(EV / "en/eval/mmlu/val")
    assert {r["subject"] for r in m} == {"marketing", "nutrition"} and len(m) == 16
    f = read_parallel(EV / "az/dev/flores200.dev.eng_Latn.txt", EV / "az/dev/flores200.dev.azj_Latn.txt")
    assert len(f) == 200 and f[0]["source"] and f[0]["target"]
    assert len(task_texts(f[:3])) == 6


def _write_test_splits(root):
    """Test splits that are not in ../shared, written in the format of the dev splits."""
    (root / "sib").mkdir()
    (root / "sib/test.tsv").write_text(
        'index_id\tcategory\ttext\n9001\thealth\t"Həkim ""sağlam"" dedi."\n9002\ttravel\tQatar Bakıdan çıxdı.\n',
        encoding="utf-8",
    )
    (root / "tumlu/test").mkdir(parents=True)
    rec = {
        "question": "2 + 2 neçədir?",
        "choices": ["3", "4", "5", "6"],
        "answer": "B",
        "subject": "Mathematics",
        "CoT": "Addım-addım düşünək. Düzgün cavab B variantıdır.",
    }
    (root / "tumlu/test/Mathematics.jsonl").write_text(json.dumps(rec, ensure_ascii=False) + "\n", encoding="utf-8")
    (root / "mmlu/test").mkdir(parents=True)
    (root / "mmlu/test/marketing_test.csv").write_text('"What is 4P?",Price,Place,Product,All of these,D\n')


def test_a_test_split_in_the_dev_format_works_with_no_code_change(tmp_path):
    from azllm.evaluation.tasks import local_task, task_rows

    _write_test_splits(tmp_path)
    (sib,) = local_task(
        "sib200_az", path=str(tmp_path / "sib/test.tsv"), fewshot_path=str(EV / "az/eval/sib200/azj_Latn/train.tsv")
    )
    assert [r["text"] for r in task_rows(sib)] == ['Həkim "sağlam" dedi.', "Qatar Bakıdan çıxdı."]
    (tum,) = local_task(
        "tumlu_az", path=str(tmp_path / "tumlu/test"), fewshot_path=str(EV / "az/eval/tumlu/dev"), num_fewshot=1
    )
    assert task_rows(tum)[0]["answer"] == 1 and len(task_rows(tum, "fewshot")) == 14
    (mm,) = local_task("mmlu_en", path=str(tmp_path / "mmlu/test"), fewshot_path=str(EV / "en/eval/mmlu/dev"))
    assert mm["task"] == "mmlu_en_marketing" and task_rows(mm)[0]["answer"] == 3


def test_bad_files_name_the_file_line_and_the_fix(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "choices": ["a", "b", "c", "d"]}) + "\n")
    with pytest.raises(EvalDataError, match=r"bad.jsonl:1: missing field\(s\) \['answer'\]"):
        read_tumlu(bad)
    bad.write_text(json.dumps({"question": "q", "choices": ["a", "b", "c"], "answer": "D"}) + "\n")
    with pytest.raises(EvalDataError, match=r"bad.jsonl:1: answer 'D' is not a letter of the 3 choices \(ABC\)"):
        read_tumlu(bad)
    csvf = tmp_path / "x_test.csv"
    csvf.write_text("q,a,b,c,d,E\n")
    with pytest.raises(EvalDataError, match="x_test.csv:1: answer 'E' is not one of A, B, C, D"):
        read_mmlu(csvf)
    tsv = tmp_path / "t.tsv"
    tsv.write_text("index_id\tcategory\ttext\n1\tweather\tSalam\n")
    with pytest.raises(EvalDataError, match=r"t.tsv:2: category 'weather' is not one of the task's labels"):
        read_sib200(tsv, LABELS)
    tsv.write_text("id\tlabel\ttext\n")
    with pytest.raises(EvalDataError, match="the header row must be index_id<TAB>category<TAB>text"):
        read_sib200(tsv, LABELS)


def test_an_empty_split_and_a_missing_path_are_errors(tmp_path):
    empty = tmp_path / "dev.tsv"
    empty.write_text("index_id\tcategory\ttext\n")
    with pytest.raises(EvalDataError, match="dev.tsv: the split is empty"):
        read_sib200(empty, LABELS)
    (tmp_path / "tumlu").mkdir()
    with pytest.raises(EvalDataError, match=r"no \*.jsonl file in this folder"):
        split_files(tmp_path / "tumlu", "*.jsonl")
    with pytest.raises(EvalDataError, match="no such file or folder; set the task's path"):
        read_mmlu(tmp_path / "nowhere")
    with pytest.raises(EvalDataError, match=r"MMLU subject\(s\) \['astronomy'\] not found"):
        read_mmlu(EV / "en/eval/mmlu/val", ["astronomy"])
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("x\ny\n")
    b.write_text("x\n")
    with pytest.raises(EvalDataError, match="must be line-parallel"):
        read_parallel(a, b)


def test_a_sib200_folder_is_every_split_in_it_and_an_id_counts_once(tmp_path):
    folder = EV / "az/eval/sib200/azj_Latn"
    rows = read_sib200(folder, LABELS)
    assert rows == read_sib200(folder / "dev.tsv", LABELS) + read_sib200(folder / "train.tsv", LABELS)
    (tmp_path / "a.tsv").write_bytes((folder / "dev.tsv").read_bytes())
    (tmp_path / "b.tsv").write_bytes((folder / "dev.tsv").read_bytes())
    with pytest.raises(EvalDataError, match="appears twice"):
        read_sib200(tmp_path, LABELS)
