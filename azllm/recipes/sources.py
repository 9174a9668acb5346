"""Which data a run gets, decided before any work starts: local files, the Hugging Face Hub, or the shipped sample.

:func:`choose` looks at the params and the machine, in this order:

1. **local**: a data root is set (``data.root``, else ``$AZLLM_DATA_ROOT``, else ``../shared`` when that folder is
   beside the repository: :func:`azllm.recipes.paths.default_data_root`, the same for every command). Nothing changes.
2. **hub**: no data root, and the Hub answers (:func:`hub_reachable`). Every source falls back to its ``hub``
   dataset. A gated dataset (:data:`GATED`, e.g. FLORES+) needs ``HF_TOKEN``: without one the run says so at once
   and evaluates on the sample's FLORES-200 dev instead (same sentences as FLORES+ dev, from the original release),
   and baselines whose hub model is gated are left out.
3. **sample**: neither. The run uses ``sample/`` of the repository (redistributable text only, see its README),
   without the baseline tokenizers (their files come from a data root or the hub); every page says so in its first
   line (:func:`banner`).

The decision is plain data (``{"mode", "overrides", "notes"}``) that the report runner lays over the params and
records in ``metrics.json`` (``run.data``).

:func:`resolve` is the one place a recipe turns a source of the params into files or a hub dataset, against the
run's data root.
"""

from __future__ import annotations

import os

from .. import data as azdata
from ..config import Config, SourceConfig
from ..utils import REPO_ROOT
from .paths import Paths

__all__ = ["SAMPLE_ROOT", "GATED", "hub_reachable", "choose", "banner", "resolve"]

SAMPLE_ROOT = REPO_ROOT / "sample"
"""The shipped sample, a data root (see ``sample/README.md``)."""

GATED = ("openlanguagedata/flores_plus", "meta-llama/", "google/gemma", "mistralai/")
"""Hub ids (or id prefixes) that need an accepted license and ``HF_TOKEN``."""

HUB_PROBE = "https://huggingface.co/api/models/openai-community/gpt2"


def hub_reachable(timeout_s: float = 5.0) -> bool:
    """Whether the Hugging Face Hub answers within ``timeout_s`` (never when ``HF_HUB_OFFLINE`` is set)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    import requests

    try:
        return requests.head(HUB_PROBE, timeout=timeout_s, allow_redirects=True).status_code < 500
    except requests.RequestException:
        return False


def _gated(hub_id: str | None) -> bool:
    return bool(hub_id) and hub_id.startswith(GATED)


def _sample_flores(side: str) -> dict:
    name = "flores200.dev.azj_Latn.txt" if side == "az" else "flores200.dev.eng_Latn.txt"
    return {"path": str(SAMPLE_ROOT / "data" / "az" / "dev" / name), "hub": None}


def _without_gated_hub(cfg: Config) -> tuple[dict, list[str]]:
    """Overrides for a hub run without ``HF_TOKEN``: gated eval sets -> the sample's FLORES dev, gated baselines
    out."""
    over: dict = {"data": {}}
    notes = []
    evals = {}
    for name, src in cfg.data.eval.items():
        if _gated(src.hub):
            evals[name] = {**src.model_dump(), **_sample_flores("az")}
            notes.append(
                f"data.eval.{name}: {src.hub} is gated and HF_TOKEN is not set; using the sample's FLORES-200 dev"
            )
        else:
            evals[name] = src.model_dump()
    parallel = {}
    for name, pair in cfg.data.parallel.items():
        sides = {}
        for side in ("az", "en"):
            src = getattr(pair, side)
            sides[side] = {**src.model_dump(), **(_sample_flores(side) if _gated(src.hub) else {})}
        parallel[name] = sides
        if any(_gated(getattr(pair, s).hub) for s in ("az", "en")):
            notes.append(f"data.parallel.{name}: gated on the hub without HF_TOKEN; using the sample's FLORES-200 dev")
    over["data"] = {"eval": evals, "parallel": parallel}
    kept = {n: b.model_dump() for n, b in cfg.baselines.items() if not _gated(b.hub)}
    if len(kept) < len(cfg.baselines):
        notes.append(
            f"baselines {sorted(set(cfg.baselines) - set(kept))} are gated on the hub and HF_TOKEN is not set: left out"
        )
        over["baselines"] = kept
        over["adapt"] = {"extend_bases": [b for b in cfg.adapt.extend_bases if b in kept]}
        if cfg.corpus.count_with and cfg.corpus.count_with not in kept:
            over["corpus"] = {"count_with": None}
    return over, notes


def _in_sample(baseline) -> bool:
    """Whether the sample holds a baseline's files (a tiktoken encoding: its cache file, named by the sha1 of the
    URL tiktoken downloads it from)."""
    import hashlib

    if not baseline.path or not (SAMPLE_ROOT / baseline.path).exists():
        return False
    if not baseline.tiktoken:
        return True
    url = f"https://openaipublic.blob.core.windows.net/encodings/{baseline.tiktoken}.tiktoken"
    return (SAMPLE_ROOT / baseline.path / hashlib.sha1(url.encode()).hexdigest()).is_file()


def _sample(cfg: Config) -> tuple[dict, list[str]]:
    """Overrides for the shipped sample: its root, and only the baselines it holds. It ships none (published
    tokenizers come from a data root or the hub), so a sample run compares no baselines unless a user adds their
    files to ``sample/tokenizers/``."""
    kept = {n: b.model_dump() for n, b in cfg.baselines.items() if _in_sample(b)}
    count = cfg.corpus.count_with if cfg.corpus.count_with in kept else None
    notes = [
        f"no data root and no Hugging Face Hub: running on the shipped sample {SAMPLE_ROOT} (redistributable "
        "text only; see sample/README.md). Its numbers show the pages working, not the study's results.",
        f"baselines kept: {sorted(kept)} (published tokenizers come from a data root or the hub; the sample has "
        "none of their files)",
    ]
    return {
        "data": {"root": str(SAMPLE_ROOT)},
        "baselines": kept,
        "corpus": {"count_with": count},
        "adapt": {"extend_bases": [b for b in cfg.adapt.extend_bases if b in kept]},
    }, notes


def choose(cfg: Config, *, environ=None, probe=hub_reachable) -> dict:
    """``{"mode": "local" | "hub" | "sample", "overrides": {...}, "notes": [...]}`` for ``cfg`` (module
    docstring)."""
    environ = os.environ if environ is None else environ
    if Paths.of(cfg).data_root is not None:
        return {"mode": "local", "overrides": {}, "notes": []}
    if probe():
        if environ.get("HF_TOKEN"):
            return {"mode": "hub", "overrides": {}, "notes": ["no data root: hub sources (HF_TOKEN is set)"]}
        over, notes = _without_gated_hub(cfg)
        return {"mode": "hub", "overrides": over, "notes": ["no data root: hub sources", *notes]}
    over, notes = _sample(cfg)
    return {"mode": "sample", "overrides": over, "notes": notes}


def banner(decision: dict) -> str | None:
    """The first line of every page of a sample run (None for the other modes)."""
    if decision.get("mode") != "sample":
        return None
    return (
        "SAMPLE DATA: this report ran on the small sample shipped in the repository (no data root, no network), "
        "not on the study's corpus; its numbers only show the pages working. Set AZLLM_DATA_ROOT or data.root "
        "to your data."
    )


def resolve(cfg: Config, source: SourceConfig, **over) -> azdata.Resolved:
    """A source of the params resolved against the data root (``over`` replaces fields, e.g. a cap)."""
    return azdata.resolve_source({**source.model_dump(), **over}, Paths.of(cfg).data_root)
