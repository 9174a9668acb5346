"""Readers of the evaluation data, validated: SIB-200, TUMLU, MMLU and FLORES in the formats of their releases.

Each benchmark has dev and test splits of one format; a reader takes any split (a file or a folder) and returns a
list of plain records, or raises :class:`EvalDataError` naming the file, the line and what to do:

- SIB-200 (``index_id<TAB>category<TAB>text``, header row, quotes doubled): :func:`read_sib200`;
- TUMLU (JSON lines ``question``, ``choices``, ``answer`` A-D, ``subject``, ``CoT``; a folder of ``*.jsonl``):
  :func:`read_tumlu`;
- MMLU (headerless CSV ``question,A,B,C,D,answer``; the subject is the file name less ``_dev``/``_val``/``_test``;
  a folder of ``*.csv``): :func:`read_mmlu`;
- FLORES (two line-parallel text files): :func:`read_parallel`.

:func:`hf_dataset` turns records into the ``datasets.DatasetDict`` an lm-eval task reads (the ``custom_dataset``
callables of :mod:`azllm.evaluation.tasks`).

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "dev.tsv"
>>> _ = p.write_text('index_id\\tcategory\\ttext\\n7\\tsports\\t"Bu, ""idman"" xəbəridir."\\n', encoding="utf-8")
>>> read_sib200(p, ["sports", "travel"])
[{'id': '7', 'text': 'Bu, "idman" xəbəridir.', 'category': 'sports', 'label': 0}]
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

__all__ = [
    "EvalDataError",
    "read_sib200",
    "read_tumlu",
    "read_mmlu",
    "read_parallel",
    "split_files",
    "hf_dataset",
    "task_texts",
    "LETTERS",
]

LETTERS = "ABCDEFGHIJ"


class EvalDataError(ValueError):
    """An evaluation file is missing, empty or malformed (the message names the file and what to do)."""


def split_files(path: str | os.PathLike, pattern: str) -> list[Path]:
    """The files of a split: ``path`` itself, or the files matching ``pattern`` under the folder ``path``."""
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(f for f in p.glob(pattern) if f.is_file())
        if files:
            return files
        raise EvalDataError(
            f"{p}: no {pattern} file in this folder; point the task's path at a split of the "
            "benchmark (a file or a folder of them)"
        )
    raise EvalDataError(f"{p}: no such file or folder; set the task's path in the params (evaluate.local.<task>.path)")


def _nonempty(rows: list, where: str) -> list:
    if not rows:
        raise EvalDataError(f"{where}: the split is empty (no records); point the task at a split with items")
    return rows


def read_sib200(path: str | os.PathLike, labels: list[str]) -> list[dict]:
    """SIB-200 rows ``{id, text, category, label}`` of ``path`` (a ``.tsv`` file, or every ``.tsv`` of a folder in
    name order: ``dev.tsv`` then ``train.tsv``, 420 Azerbaijani items); ``label`` is the category's index in
    ``labels``. An id found twice is an error (a split given twice would count its items twice)."""
    rows, seen = [], set()
    want = ["index_id", "category", "text"]
    for f in split_files(path, "*.tsv"):
        with open(f, encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh, delimiter="\t")
            header = next(reader, None)
            if header is None or [h.strip() for h in header[:3]] != want:
                raise EvalDataError(f"{f}: the header row must be {'<TAB>'.join(want)}, found {header!r}")
            for line_no, rec in enumerate(reader, start=2):
                if len(rec) < 3 or not rec[2].strip():
                    raise EvalDataError(
                        f"{f}:{line_no}: a row needs index_id, category and a non-empty text, got {rec!r}"
                    )
                if rec[1] not in labels:
                    raise EvalDataError(f"{f}:{line_no}: category {rec[1]!r} is not one of the task's labels {labels}")
                if rec[0] in seen:
                    raise EvalDataError(f"{f}:{line_no}: index_id {rec[0]!r} appears twice in {path}")
                seen.add(rec[0])
                rows.append({"id": rec[0], "text": rec[2], "category": rec[1], "label": labels.index(rec[1])})
    return _nonempty(rows, str(path))


def read_tumlu(path: str | os.PathLike, subjects: list[str] | None = None) -> list[dict]:
    """TUMLU records ``{question, choices, answer (an index), letter, subject, cot}`` of every ``*.jsonl`` under
    ``path`` (a file or a folder), in file order; ``subjects`` keeps only those subjects."""
    rows = []
    for f in split_files(path, "*.jsonl"):
        for line_no, line in enumerate(f.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise EvalDataError(f"{f}:{line_no}: not valid JSON ({e})") from None
            missing = [k for k in ("question", "choices", "answer") if k not in rec]
            if missing:
                raise EvalDataError(
                    f"{f}:{line_no}: missing field(s) {missing}; a TUMLU record has question, "
                    f"choices, answer (A-D), subject and CoT; found {sorted(rec)}"
                )
            choices = rec["choices"]
            if not isinstance(choices, list) or len(choices) < 2:
                raise EvalDataError(f"{f}:{line_no}: choices must be a list of at least 2 options, got {choices!r}")
            letter = str(rec["answer"]).strip().upper()
            if len(letter) != 1 or letter not in LETTERS[: len(choices)]:
                raise EvalDataError(
                    f"{f}:{line_no}: answer {rec['answer']!r} is not a letter of the "
                    f"{len(choices)} choices ({LETTERS[: len(choices)]})"
                )
            subject = rec.get("subject") or f.stem
            if subjects and subject not in subjects:
                continue
            rows.append(
                {
                    "question": rec["question"],
                    "choices": [str(c) for c in choices],
                    "answer": LETTERS.index(letter),
                    "letter": letter,
                    "subject": subject,
                    "cot": rec.get("CoT") or "",
                }
            )
    return _nonempty(rows, str(path))


def subject_of(f: Path) -> str:
    stem = f.stem
    for suffix in ("_dev", "_val", "_test", "_train"):
        if stem.endswith(suffix):
            return stem[: -len(suffix)]
    return stem


def read_mmlu(path: str | os.PathLike, subjects: list[str] | None = None) -> list[dict]:
    """MMLU records ``{question, choices, answer (an index), subject}`` of every ``*.csv`` under ``path``;
    ``subjects`` keeps only those (an unknown subject is an error that lists the subjects found)."""
    files = split_files(path, "*.csv")
    found = {subject_of(f): f for f in files}
    if subjects:
        unknown = sorted(set(subjects) - set(found))
        if unknown:
            raise EvalDataError(f"{path}: MMLU subject(s) {unknown} not found; subjects here: {sorted(found)}")
        files = [found[s] for s in subjects]
    rows = []
    for f in files:
        with open(f, encoding="utf-8", newline="") as fh:
            for line_no, rec in enumerate(csv.reader(fh), start=1):
                if len(rec) != 6:
                    raise EvalDataError(
                        f"{f}:{line_no}: an MMLU row has 6 fields (question,A,B,C,D,answer), got {len(rec)}"
                    )
                letter = rec[5].strip().upper()
                if len(letter) != 1 or letter not in LETTERS[:4]:
                    raise EvalDataError(f"{f}:{line_no}: answer {rec[5]!r} is not one of A, B, C, D")
                rows.append(
                    {"question": rec[0], "choices": rec[1:5], "answer": LETTERS.index(letter), "subject": subject_of(f)}
                )
    return _nonempty(rows, str(path))


def read_parallel(src: str | os.PathLike, tgt: str | os.PathLike, *, first: int | None = None) -> list[dict]:
    """Line-parallel ``{source, target}`` pairs of two text files (FLORES); ``first`` keeps the first lines."""
    sides = []
    for p in (src, tgt):
        p = Path(p)
        if not p.is_file():
            raise EvalDataError(f"{p}: no such file; set the task's path (with {{lang}} for the language code)")
        sides.append(p.read_text(encoding="utf-8").splitlines())
    if len(sides[0]) != len(sides[1]):
        raise EvalDataError(
            f"{src} has {len(sides[0])} lines but {tgt} has {len(sides[1])}: the files must be line-parallel"
        )
    rows = [{"source": s, "target": t} for s, t in zip(*sides) if s.strip() and t.strip()]
    return _nonempty(rows[:first] if first else rows, str(src))


def hf_dataset(splits: dict[str, list[dict]]):
    """``{split: records}`` as a ``datasets.DatasetDict`` (what an lm-eval ``custom_dataset`` returns)."""
    import datasets

    return datasets.DatasetDict({k: datasets.Dataset.from_list(v) for k, v in splits.items()})


def task_texts(rows: list[dict]) -> list[str]:
    """The texts of a task's records a training corpus must not contain (decontamination): SIB-200 sentences,
    questions, FLORES sources and targets."""
    out = []
    for r in rows:
        for k in ("text", "question", "source", "target"):
            if r.get(k):
                out.append(r[k])
    return out
