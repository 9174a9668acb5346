"""A sweep file (``azllm sweep FILE``, :mod:`azllm.recipes.sweep`): one stage's settings varied on one params file,
each variant judged on the selection split, the setting chosen by a stated rule. See ``params/sweeps/``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .data import Section


class SweepConfig(Section):
    """What a sweep runs: ``params`` with each variant's settings laid over ``stage``'s section."""

    params: str
    """The params file every variant starts from (relative to the repository root, or absolute)."""
    stage: Literal["preference"] = "preference"
    """The stage whose settings vary (its command runs once per variant: ``azllm prefer``)."""
    variants: dict[str, dict[str, Any]] = Field(min_length=1)
    """Name -> the settings of ``stage``'s section that the variant changes (``{lr: 5.0e-5, sft_weight: 1.0}``);
    everything else is the params file's. Each variant's export is off."""
    note: str = ""
    """What the variants are for, shown with the record."""
