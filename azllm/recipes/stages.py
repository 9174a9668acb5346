"""Stages chained by their artifacts, not by their calls.

A stage that needs another's output asks for it here (:func:`require`), the one place that knows which function
builds each stage's output (:data:`BUILDERS`); no stage's command calls another stage's command (a test walks the call
graph of ``azllm/recipes``). Every stage is chained this way: the corpus stage's mix (``corpus``) -> the run's
tokenizer (``tokenizers``) -> token files and training (their own content-keyed caches and ``prepared.json``) ->
adaptation's chosen base (``adapt``) -> SFT's export (``sft``; its builder trains and exports, without the answers
``azllm sft`` adds) -> preference tuning, and the distilled students (``distill``) -> deployment.

A stage that finishes writes a completeness marker (:meth:`azllm.recipes.paths.Paths.stage_done`:
``artifacts/<run>/stages/<stage>.json``) naming its output and the hash of the params it was made with
(:func:`mark`). A later stage looks for its input by that marker first (:func:`finished`): preference tuning on a
run whose SFT export exists opens that folder and loads nothing of adaptation or SFT. A marker counts only for the
same params (their hash) and while its output is still there and complete (a model folder with its
``config.json``); otherwise the later stage builds its input as before, and that run writes the marker again.

Decision: the whole params hash, not the sections a stage reads: a stale output is never taken for a changed run,
and a rebuild goes through the stage's own caches (finished runs by key), so it costs the loading, not the training.
An export of the same finished run is kept as it is (adaptation's, SFT's and distillation's folders record their
run's key in ``azllm_export.json``), so what later stages cached by its weights (:func:`azllm.utils.weights_id`:
preference runs, scores, answers) stays valid when only the params hash changed.

>>> from azllm.config import load_params
>>> finished(load_params(None, overrides={"run_name": "nothing-here"}), "sft") is None
True
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..config import Config
from .paths import Paths

__all__ = ["ORDER", "BUILDERS", "StageError", "mark", "finished", "require"]

ORDER = ("corpus", "tokenizers", "tokens", "train", "adapt", "evaluate", "sft", "distill", "deploy", "preference")
"""The stages in the order a run makes them (notebooks 00-09; preference tuning last, after SFT)."""


BUILDERS = {
    "corpus": ("azllm.recipes.corpus", "corpus_output", "corpus.enabled must be true"),
    "tokenizers": (
        "azllm.recipes.tokenizers",
        "main_tokenizer",
        "tokens.tokenizer must be unset: a given tokenizer is loaded, not made",
    ),
    "adapt": ("azllm.recipes.adapt", "adapted_base", "the adaptation runs and their export"),
    "sft": ("azllm.recipes.sft", "sft_output", "the SFT run and its export"),
    "distill": ("azllm.recipes.distill", "run_distill", "distill.export must be true"),
}
"""``{stage: (module, function, what it makes or needs to leave its output)}``: the function that builds the
stage's output and marks it (:func:`mark`), called as ``function(cfg, show=show)``."""


class StageError(RuntimeError):
    """A stage's builder returned without leaving its output (interrupted by a signal, or its params turn it off)."""


def _check(stage: str) -> None:
    if stage not in ORDER:
        raise ValueError(f"unknown stage {stage!r}; the stages: {', '.join(ORDER)}")


def mark(cfg: Config, stage: str, artifact: str | os.PathLike, *, complete: str = "config.json", **facts) -> Path:
    """Write the completeness marker of ``stage``: its output ``artifact`` (a file, or a folder that is complete
    while it holds the file ``complete``), the params hash and ``facts`` (JSON values); returns the marker's path."""
    from ..utils import atomic_write_json

    _check(stage)
    path = Paths.of(cfg).stage_done(stage)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = Path(artifact).resolve()
    record = {"stage": stage, "params_hash": cfg.hash(), "artifact": str(out), **facts}
    if out.is_dir():
        record["complete"] = complete
    atomic_write_json(path, record)
    return path


def finished(cfg: Config, stage: str) -> dict | None:
    """The marker of ``stage`` for these params while its output is complete, else None."""
    _check(stage)
    try:
        record = json.loads(Paths.of(cfg).stage_done(stage).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    out = Path(record.get("artifact") or "")
    complete = (out / record["complete"]).is_file() if "complete" in record else out.is_file()
    return record if record.get("params_hash") == cfg.hash() and complete else None


def require(cfg: Config, stage: str, *, show=lambda line: None) -> dict:
    """The marker of ``stage`` for these params (:func:`finished`); when there is none, the stage's builder
    (:data:`BUILDERS`) makes its output once, then its marker is read. ``show`` gets one line saying which.
    A builder that leaves no output raises :class:`StageError`, naming what the stage needs."""
    import importlib

    done = finished(cfg, stage)
    if done is not None:
        show(f"{stage}: this run's output, found by its marker: {done['artifact']}")
        return done
    if stage not in BUILDERS:
        raise ValueError(f"stage {stage!r} has no builder; the stages that do: {', '.join(BUILDERS)}")
    module, name, needs = BUILDERS[stage]
    show(f"{stage}: no finished output for these params; building it ({module}.{name})")
    getattr(importlib.import_module(module), name)(cfg, show=show)
    done = finished(cfg, stage)
    if done is None:
        raise StageError(
            f"the {stage} stage finished without its output ({needs}; a run interrupted by a signal resumes when "
            "run again)"
        )
    return done
