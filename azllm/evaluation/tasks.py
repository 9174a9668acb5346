"""The local evaluation tasks: lm-eval task YAMLs shipped in ``azllm/evaluation/tasks/``, their data loaders, and
the task configs a run evaluates.

Each YAML is a plain lm-eval 0.4 task whose ``custom_dataset`` is a loader below; its ``dataset_kwargs`` hold the
paths of the test split and of the few-shot pool, relative to a data root. lm-eval's own command line runs them
too::

    lm_eval --model hf --model_args pretrained=PATH --include_path azllm/evaluation/tasks \\
        --tasks sib200_az,tumlu_az --metadata '{"data_root": "../shared"}'

:func:`local_task` reads a YAML and lays the run's paths, few-shot count and subset over it, so a task points at
any split of the benchmark's format (the larger test splits not in ``../shared``) with no code change. MMLU is one
task per subject (``mmlu_en_<subject>``, from one template), as in lm-eval's own ``mmlu``.

When the few-shot pool is the test split itself, the task's ``fewshot_split`` is the test split, so lm-eval leaves
each item out of its own context; :func:`fewshot_overlap` counts the test items that also sit in the pool.

>>> sorted(LOCAL_TASKS)
['flores_az_en', 'flores_en_az', 'mmlu_en', 'sib200_az', 'sib200_en', 'tumlu_az', 'tumlu_az_cot']
"""

from __future__ import annotations

import os
from pathlib import Path

from .datasets import EvalDataError, hf_dataset, read_mmlu, read_parallel, read_sib200, read_tumlu, split_files

__all__ = [
    "TASK_DIR",
    "LOCAL_TASKS",
    "chance",
    "identity_chrf",
    "local_task",
    "task_rows",
    "fewshot_overlap",
    "config_hash",
    "sib200_dataset",
    "tumlu_dataset",
    "mmlu_dataset",
    "flores_dataset",
    "letter_match",
    "mmlu_subjects",
]

TASK_DIR = Path(__file__).parent / "tasks"
"""The shipped task YAMLs (lm-eval's ``--include_path``)."""

LOCAL_TASKS = {p.stem: p for p in sorted(TASK_DIR.glob("*.yaml"))}
"""Task name -> its YAML."""


def _at(root: str | None, path: str) -> str:
    p = Path(os.path.expanduser(path))
    return str(p if p.is_absolute() or not root else Path(root) / p)


# ------------------------------------------------------------------------------------------------ loaders


def _first(rows: list[dict], first: int | None) -> list[dict]:
    return rows[:first] if first else rows


def sib200_dataset(
    *,
    path: str,
    fewshot_path: str | None = None,
    labels: list[str],
    first: int | None = None,
    data_root: str | None = None,
    **_,
):
    """SIB-200 as lm-eval splits ``test`` and ``fewshot`` (``custom_dataset`` of sib200_*.yaml); ``first``: the
    first items of the test split."""
    splits = {"test": _first(read_sib200(_at(data_root, path), labels), first)}
    if fewshot_path:
        splits["fewshot"] = read_sib200(_at(data_root, fewshot_path), labels)
    return hf_dataset(splits)


def tumlu_dataset(
    *,
    path: str,
    fewshot_path: str | None = None,
    subjects: list[str] | None = None,
    first: int | None = None,
    data_root: str | None = None,
    **_,
):
    """TUMLU as lm-eval splits ``test`` and ``fewshot``."""
    splits = {"test": _first(read_tumlu(_at(data_root, path), subjects), first)}
    if fewshot_path:
        splits["fewshot"] = read_tumlu(_at(data_root, fewshot_path), subjects)
    return hf_dataset(splits)


def mmlu_dataset(
    *,
    path: str,
    fewshot_path: str | None = None,
    subject: str,
    first: int | None = None,
    data_root: str | None = None,
    **_,
):
    """One MMLU subject as lm-eval splits ``test`` and ``fewshot`` (``first``: the subject's first items)."""
    splits = {"test": _first(read_mmlu(_at(data_root, path), [subject]), first)}
    if fewshot_path:
        splits["fewshot"] = read_mmlu(_at(data_root, fewshot_path), [subject])
    return hf_dataset(splits)


def flores_dataset(
    *,
    path: str,
    fewshot_path: str | None = None,
    source_lang: str,
    target_lang: str,
    first: int | None = None,
    data_root: str | None = None,
    **_,
):
    """FLORES source/target pairs as lm-eval splits ``test`` and ``fewshot`` (``path`` holds ``{lang}``).

    When the pool is the test file, lm-eval leaves the item itself out (``fewshot_split`` is ``test``)."""

    def pair(p):
        if "{lang}" not in p:
            raise EvalDataError(
                f"{p}: a FLORES path needs {{lang}} where the language code goes ({source_lang}, {target_lang})"
            )
        return read_parallel(_at(data_root, p.format(lang=source_lang)), _at(data_root, p.format(lang=target_lang)))

    splits = {"test": _first(pair(path), first)}
    if fewshot_path:
        splits["fewshot"] = pair(fewshot_path)
    return hf_dataset(splits)


def letter_match(doc: dict, results: list[str]) -> dict:
    """``exact_match`` of the letter a generative TUMLU answer ends on (``process_results`` of tumlu_az_cot)."""
    return {"exact_match": float(results[0].strip().upper() == doc["letter"])}


# -------------------------------------------------------------------------------------------- task configs


def read_task_yaml(path: Path) -> dict:
    from lm_eval.tasks._yaml_loader import load_yaml

    return dict(load_yaml(path, resolve_func=True))


def _family(name: str) -> str:
    return name.split("_")[0]


def mmlu_subjects(path: str | os.PathLike) -> list[str]:
    """The subjects of an MMLU split folder (file names less ``_dev``/``_val``/``_test``)."""
    from .datasets import subject_of

    return sorted({subject_of(f) for f in split_files(path, "*.csv")})


def local_task(
    name: str,
    *,
    path: str | None = None,
    fewshot_path: str | None = None,
    num_fewshot: int | None = None,
    subset: list[str] | None = None,
    first: int | None = None,
    max_gen_toks: int | None = None,
) -> list[dict]:
    """The lm-eval config(s) of a shipped task with the run's data laid over its YAML (absolute paths).

    Returns one config, or one per subject for ``mmlu_en`` (``subset``: the subjects; default every subject of
    the test split). ``fewshot_path`` equal to ``path`` makes the test split the few-shot split (lm-eval then leaves
    each item out of its own context); ``fewshot_path=""`` means no pool (zero-shot only).
    """
    if name not in LOCAL_TASKS:
        raise KeyError(name)
    cfg = read_task_yaml(LOCAL_TASKS[name])
    kw = dict(cfg.get("dataset_kwargs") or {})
    if path is not None:
        kw["path"] = path
    if fewshot_path is not None:
        kw["fewshot_path"] = fewshot_path or None
    if first is not None:
        kw["first"] = first
    if subset and _family(name) == "tumlu":
        kw["subjects"] = list(subset)
    if num_fewshot is not None:
        cfg["num_fewshot"] = num_fewshot
    if max_gen_toks is not None and cfg.get("generation_kwargs"):
        cfg["generation_kwargs"] = {**cfg["generation_kwargs"], "max_gen_toks": max_gen_toks}
    same = kw.get("fewshot_path") and os.path.abspath(kw["fewshot_path"]) == os.path.abspath(kw["path"])
    if same:
        kw["fewshot_path"] = None
        cfg["fewshot_split"] = cfg["test_split"]
    elif not kw.get("fewshot_path"):
        cfg.pop("fewshot_split", None)
        if cfg.get("num_fewshot"):
            raise EvalDataError(
                f"task {name}: num_fewshot={cfg['num_fewshot']} needs a few-shot pool "
                "(evaluate.local.<task>.fewshot_path)"
            )
    cfg["dataset_kwargs"] = kw
    _check_paths(name, kw)
    if name != "mmlu_en":
        return [cfg]
    found = mmlu_subjects(_at(kw.get("data_root"), kw["path"]))
    subjects = list(subset) if subset else found
    if unknown := sorted(set(subjects) - set(found)):
        raise EvalDataError(f"{kw['path']}: MMLU subject(s) {unknown} not found; subjects here: {found}")
    out = []
    for s in subjects:
        c = {
            **cfg,
            "task": f"mmlu_en_{s}",
            "dataset_kwargs": {**kw, "subject": s},
            "description": f"The following are multiple choice questions (with answers) about "
            f"{s.replace('_', ' ')}.\n\n",
        }
        out.append(c)
    return out


_PATTERN = {"sib200": "*.tsv", "tumlu": "*.jsonl", "mmlu": "*.csv"}


def _check_paths(name: str, kw: dict) -> None:
    """Fail early, naming the path, when a task's test split or pool is not there."""
    for key in ("path", "fewshot_path"):
        p = kw.get(key)
        if not p:
            continue
        if _family(name) == "flores":
            for lang in (kw["source_lang"], kw["target_lang"]):
                if "{lang}" in p and not Path(_at(kw.get("data_root"), p.format(lang=lang))).is_file():
                    raise EvalDataError(f"{p.format(lang=lang)}: no such file; set evaluate.local.{name}.{key}")
        else:
            split_files(_at(kw.get("data_root"), p), _PATTERN[_family(name)])


def task_rows(config: dict, split: str = "test") -> list[dict]:
    """The records of one split of a local task config (what decontamination and the overlap check read)."""
    fn = config["custom_dataset"]
    kw = dict(config["dataset_kwargs"])
    if split == "fewshot":
        if not kw.get("fewshot_path"):
            return task_rows(config, "test") if config.get("fewshot_split") == config.get("test_split") else []
        kw["path"] = kw["fewshot_path"]
        kw.pop("first", None)  # ``first`` cuts the test split, never the pool
    kw["fewshot_path"] = None
    return list(fn(**kw)["test"])


def _item_key(r: dict) -> str:
    return " ".join(str(r.get(k) or "") for k in ("text", "question", "source")).strip()


def fewshot_overlap(config: dict) -> dict:
    """How many test items also sit in the few-shot pool (by their text), and whether the pool is the test split."""
    same = bool(config.get("fewshot_split")) and config.get("fewshot_split") == config.get("test_split")
    test = {_item_key(r) for r in task_rows(config, "test")}
    pool = {_item_key(r) for r in task_rows(config, "fewshot")} if config.get("fewshot_split") else set()
    return {
        "pool_is_test_split": same,
        "test_items_in_pool": len(test & pool),
        "test_items": len(test),
        "pool": len(pool),
    }


def config_hash(config: dict) -> str:
    """A stable hash of a task config (callables by their qualified names)."""
    from ..utils import json_hash

    def plain(v):
        if callable(v):
            return f"{getattr(v, '__module__', '')}.{getattr(v, '__qualname__', repr(v))}"
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    return json_hash(plain(config))


def chance(config: dict) -> float | None:
    """The score of a system that does nothing, on the task's test items: for a multiple-choice task the mean over
    its items of 1 / number of choices; for a translation task (FLORES, chrF++) the chrF++ of each source sentence
    copied unchanged as its translation (the identity baseline: names, numbers and punctuation carry over, and
    related words share characters), so a model at or below it has not shown that it translates. None for any
    other generative task.
    """
    rows = task_rows(config, "test")
    if config.get("output_type") == "generate_until":
        if not rows or "source" not in rows[0] or "chrf" not in str(config.get("metric_list")):
            return None
        return identity_chrf([r["source"] for r in rows], [r["target"] for r in rows])
    if config.get("output_type") != "multiple_choice":
        return None
    choices = config["doc_to_choice"]
    if isinstance(choices, list):
        return 1 / len(choices)
    return sum(1 / len(r["choices"]) for r in rows) / len(rows)


def identity_chrf(sources: list[str], targets: list[str]) -> float:
    """Corpus chrF++ (sacrebleu, ``word_order=2``, as the tasks score) of ``sources`` taken as the translations of
    ``targets``.

    >>> round(identity_chrf(["Bakı 2024-cü ildə"], ["Baku in 2024"]), 2)
    21.08
    """
    from sacrebleu.metrics import CHRF

    return CHRF(word_order=2).corpus_score(list(sources), [list(targets)]).score
