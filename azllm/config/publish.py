"""The params section of publishing to the Hugging Face Hub (``azllm publish``). See :mod:`azllm.recipes.publish`.

The token is never a params key: ``HF_TOKEN`` in the environment, or the cached login (``hf auth login``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .data import Section


class PublishConfig(Section):
    """Where and how a run's model (or its corpus) goes on the Hub."""

    repo: str | None = None
    """``OWNER/NAME`` of the model's repository: ``azllm publish``'s default for ``--repo``, and, when set, a
    SageMaker job (``launch.command: sft`` or ``prefer``) publishes its model there at its end."""
    private: bool = True
    """Create the repositories private (``--public`` makes them public)."""
    gguf: Literal["same", "separate", "none"] = "same"
    """The model's GGUF files: in the model's repository (``same``), in ``OWNER/NAME-GGUF`` (``separate``), or not
    published (``none``). A model without GGUF files in the run is converted first (``deploy.quants``, checked)."""
    license: str | None = None
    """The model's license (SPDX id); None: its base's (:data:`azllm.licenses.KNOWN_BASES`). A model whose license
    is known neither way is refused until this is set."""
    base_model: str | None = None
    """The Hub id of the model the run started from, for the card's ``base_model``; None: ``adapt.base`` (or
    ``sft.base``, ``preference.base``) when it is a Hub id or in :data:`azllm.licenses.KNOWN_BASES` (the SmolLM2
    GGUF is ``HuggingFaceTB/SmolLM2-135M-Instruct``)."""
    languages: list[str] = Field(default_factory=lambda: ["az", "en"])
    """The card's ``language``."""
