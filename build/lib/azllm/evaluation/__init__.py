"""Downstream evaluation: task data and configs (lm-eval), scoring, the linear probe, before/after statistics."""

from .datasets import EvalDataError
from .harness import EvalModelError, UnknownTaskError
from .probe import ProbeError

EvalError = (EvalDataError, EvalModelError, UnknownTaskError, ProbeError)
"""The errors of bad evaluation input (a file, a model, a task name): ``except EvalError``."""

__all__ = ["EvalError", "EvalDataError", "EvalModelError", "UnknownTaskError", "ProbeError"]
