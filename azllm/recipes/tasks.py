"""The evaluation tasks of a run: ``evaluate.tasks`` split into shipped local tasks (their lm-eval configs with
the run's data paths, :func:`local_configs`) and lm-eval registry names (:func:`hub_tasks`), and the texts the
corpus stage keeps out of training (:func:`decontamination_sets`).

A local task whose data is not found under the data root is left out with a warning when the run has no local data
(a fresh clone on the shipped sample, or hub sources); with a data root, a missing file is an error when scoring
and a warning for the corpus stage's decontamination (the stage runs; the warning names the task and the file).
"""

from __future__ import annotations

import warnings

from ..config import Config
from .paths import Paths
from .sources import SAMPLE_ROOT

__all__ = ["local_configs", "local_task_args", "hub_tasks", "decontamination_sets", "probe_rows"]


def _path(paths: Paths, p: str | None) -> str | None:
    if p is None:
        return None
    if not p:
        return ""
    q = paths.under_root(p)
    return str(q) if q is not None else p


def local_task_args(cfg: Config, name: str) -> dict:
    """The keyword arguments of :func:`azllm.evaluation.tasks.local_task` for ``evaluate.local.<name>``, its paths
    resolved against the data root. A task whose ``fewshot_path`` is left out is zero-shot: it gets no pool (never
    the YAML's relative pool path, which would point nowhere)."""
    t, paths = cfg.evaluate.local[name], Paths.of(cfg)
    return {
        "path": _path(paths, t.path),
        "fewshot_path": _path(paths, t.fewshot_path) or "",
        "num_fewshot": t.num_fewshot,
        "subset": t.subset,
        "first": t.first,
        "max_gen_toks": t.max_gen_toks,
    }


def local_configs(cfg: Config, names: list[str] | None = None, *, strict: bool = True) -> list[dict]:
    """The lm-eval configs of the local tasks among ``names`` (default ``evaluate.tasks``), data resolved; MMLU is one
    config per subject. A task whose data is missing is an error when the run has a data root and ``strict``,
    else it is left out with a warning."""
    from ..evaluation.datasets import EvalDataError
    from ..evaluation.tasks import LOCAL_TASKS, local_task

    ev, paths = cfg.evaluate, Paths.of(cfg)
    out = []
    for name in names if names is not None else ev.tasks:
        if name not in LOCAL_TASKS:
            continue
        t = ev.local.get(name)
        if t is None:
            raise KeyError(
                f"evaluate.tasks names {name!r}, a shipped task, but evaluate.local has no entry for it "
                f"(its data paths); add evaluate.local.{name}.path"
            )
        try:
            out += local_task(name, **local_task_args(cfg, name))
        except EvalDataError as e:
            if paths.data_root is not None and paths.data_root != SAMPLE_ROOT.resolve() and strict:
                raise  # the shipped sample lacks TUMLU and MMLU (not redistributable / not cut): left out there
            warnings.warn(f"task {name} left out: no local data ({e})", stacklevel=2)
    return out


def hub_tasks(cfg: Config) -> list[str]:
    """The ``evaluate.tasks`` that are not shipped local tasks: lm-eval registry names, validated (an unknown name
    is an error with close matches)."""
    from ..evaluation.harness import validate_task_names
    from ..evaluation.tasks import LOCAL_TASKS

    validate_task_names(list(cfg.evaluate.tasks), list(LOCAL_TASKS))
    return [t for t in cfg.evaluate.tasks if t not in LOCAL_TASKS]


def decontamination_sets(cfg: Config) -> dict[str, list[str]]:
    """``{"task:<name>": texts}`` of every local task named in ``evaluate.tasks`` (test and few-shot splits): what the
    corpus stage adds to its decontamination (``evaluate.decontaminate``)."""
    from ..evaluation.datasets import task_texts
    from ..evaluation.tasks import task_rows

    if not cfg.evaluate.decontaminate:
        return {}
    sets: dict[str, list[str]] = {}
    for c in local_configs(cfg, strict=False):  # a task whose data is not here is warned about, not fatal
        family = c["task"].split("_en_")[0] if c["task"].startswith("mmlu_en_") else c["task"]
        texts = task_texts(task_rows(c, "test")) + task_texts(task_rows(c, "fewshot"))
        sets.setdefault(f"task:{family}", []).extend(texts)
    return {k: list(dict.fromkeys(v)) for k, v in sets.items()}


def probe_rows(cfg: Config, task: str) -> tuple[list[dict], list[dict]]:
    """``(train, test)`` records of a SIB-200 task for the linear probe: its few-shot pool and its test split."""
    from ..evaluation.tasks import task_rows

    if not task.startswith("sib200_"):
        raise ValueError(f"evaluate.probe.tasks: {task!r} is not a SIB-200 task (sib200_az, sib200_en)")
    (c,) = local_configs(cfg, [task]) or [None]
    if c is None:
        return [], []
    return task_rows(c, "fewshot"), task_rows(c, "test")
