"""The corpus stage (notebook 00): ``data.train`` cleaned, deduplicated, decontaminated and mixed.

Reads ``data`` and ``corpus``. :func:`run_corpus` runs :func:`azllm.corpus.clean_corpus` (cached by inputs and
settings under :meth:`Paths.corpus <azllm.recipes.paths.Paths.corpus>`), :func:`corpus_mix` writes the mix of
``corpus.mix`` once and marks it as the stage's output (:func:`azllm.recipes.stages.mark`), :func:`corpus_output`
does both (the stage's builder). Later stages find that output by its marker (:func:`azllm.recipes.stages.require`),
never by running the stage: :func:`corpus_source` (what tokenizers and token files read) and
:func:`clean_documents`. :func:`eval_sets` gives the held-out sets every stage evaluates on; the corpus stage
decontaminates against them and against the texts of every local evaluation task named in ``evaluate.tasks``
(:func:`azllm.recipes.tasks.decontamination_sets`).

:func:`removal_rows` and :func:`mix_rows` are what notebook 00 shows of the manifest and the mix (computed here,
formatted by :mod:`azllm.tables`).

A name in ``corpus.mix.weights`` / ``caps`` that matches no source is a warning, not a stop: the default params
name the files of ``../shared``, and the hub fallback or the shipped sample have other sources.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from .. import data as azdata
from ..config import Config
from ..utils import atomic_write_json, json_hash
from .paths import Paths
from .sources import resolve
from .stages import mark, require
from .tasks import decontamination_sets

__all__ = [
    "held_out_lines",
    "run_corpus",
    "corpus_output",
    "corpus_mix",
    "corpus_source",
    "eval_sets",
    "clean_documents",
    "removal_rows",
    "mix_rows",
    "sentence_filter_summary",
]


def run_corpus(cfg: Config, *, force: bool = False) -> dict:
    """The corpus stage on ``data.train`` (:func:`azllm.corpus.clean_corpus`); returns its manifest."""
    from ..corpus import clean_corpus

    if cfg.data.train.skip_lines:
        raise ValueError(
            "data.train.skip_lines: the corpus stage reads every line of its input (skip_lines splits "
            "evaluation sets); narrow data.train.path instead"
        )
    settings = cfg.corpus
    cores = os.cpu_count() or 1
    return clean_corpus(
        [resolve(cfg, cfg.data.train)],
        Paths.of(cfg).corpus_root,
        eval_lines=held_out_lines(cfg),
        languages=settings.languages,
        quality=settings.quality.model_dump(),
        decontamination_n=settings.decontamination_n,
        decontamination_min_words=settings.decontamination_min_words,
        minhash=settings.minhash.model_dump(),
        tasks=settings.tasks or cores,
        workers=settings.workers or cores,
        executor=settings.executor,
        executor_options=getattr(settings, settings.executor, None).model_dump()
        if settings.executor != "local"
        else None,
        force=force,
    )


def held_out_lines(cfg: Config) -> dict[str, list[str]]:
    """Every text the corpus stage keeps out of training, by set: the eval sets (every line, ``skip_lines``
    aside), the Azerbaijani side of the parallel sets and the local tasks' texts (``task:<name>``,
    :func:`azllm.recipes.tasks.decontamination_sets`)."""
    evals, parallel, _ = eval_sets(cfg, whole=True)
    return {**evals, **{f"{name}.az": pair[0] for name, pair in parallel.items()}, **decontamination_sets(cfg)}


def _known_names(names: dict, sizes: dict, what: str) -> dict:
    """``names`` without those that match no source, each of which is warned about (with the sources)."""
    unknown = sorted(set(names) - set(sizes))
    if unknown:
        warnings.warn(
            f"corpus.mix.{what}: {unknown} match no source of this corpus and are ignored; the sources are "
            f"{sorted(sizes)}",
            stacklevel=3,
        )
    return {k: v for k, v in names.items() if k in sizes}


def corpus_mix(cfg: Config, manifest: dict) -> tuple[Path, dict]:
    """The mixed corpus of ``corpus.mix`` (written once per mix): its path and ``{rates, counts}``. The mix is the
    corpus stage's output: it is marked for these params (with the manifest's ``key``)."""
    from ..corpus import in_input_order, rates, write_mix
    from ..corpus.mix import SeenShingles, expected_3grams

    mix = cfg.corpus.mix
    folder = Paths.of(cfg).corpus(manifest["key"])
    sizes = {k: v.get("kept_bytes", 0) for k, v in manifest["counts"]["by_source"].items() if k != "total"}
    caps = _known_names(mix.caps, sizes, "caps")
    weights = _known_names(mix.weights, sizes, "weights")
    source_rates = rates(
        sizes, temperature=mix.temperature, weights=weights, total_bytes=mix.total_bytes, max_repeat=mix.max_repeat
    )
    sf = mix.sentence_filter
    dedup = sf.model_dump() if mix.sentence_dedup else False
    key = json_hash({"rates": source_rates, "caps": caps, "sentence_dedup": dedup, "seed": cfg.seed})
    path = folder / f"mix-{key}.jsonl"
    counts_file = path.with_suffix(".counts.json")
    if not (path.is_file() and counts_file.is_file()):
        seen = None
        if mix.sentence_dedup:
            seen = SeenShingles(
                expected_3grams(sum(sizes.values()), sf.expected_per_byte),
                false_positive=sf.false_positive,
                max_false_positive=sf.max_false_positive,
            )
        counts = write_mix(
            in_input_order(folder / "clean"),
            path,
            source_rates=source_rates,
            caps=caps,
            sentence_filter=seen,
            seed=cfg.seed,
        )
        record = {"rates": source_rates, "caps": caps, "counts": counts}
        atomic_write_json(counts_file, {**record, "sentence_filter": seen.stats() if seen is not None else None})
    mark(cfg, "corpus", path, key=manifest["key"])
    return path, json.loads(counts_file.read_text())


def corpus_output(cfg: Config, *, show=lambda line: None) -> Path:
    """The corpus stage's output, made or found in its caches (:func:`run_corpus`, then :func:`corpus_mix`, which
    marks it): the mix's path. This is the stage's builder (:data:`azllm.recipes.stages.BUILDERS`)."""
    path, _ = corpus_mix(cfg, run_corpus(cfg))
    return path


def clean_documents(cfg: Config, *, show=lambda line: None) -> list[str]:
    """Every document the corpus stage kept, in input order (before the mix), from the stage's output for these
    params (:func:`azllm.recipes.stages.require`)."""
    from ..corpus import in_input_order

    key = require(cfg, "corpus", show=show)["key"]
    return [r["text"] for r in in_input_order(Paths.of(cfg).corpus(key) / "clean")]


def corpus_source(cfg: Config, *, show=lambda line: None) -> azdata.Resolved:
    """What token files (and, capped, tokenizers) read: the corpus stage's mix, found by its marker
    (:func:`azllm.recipes.stages.require`), or ``data.train`` when ``corpus.enabled`` is false."""
    if not cfg.corpus.enabled:
        return resolve(cfg, cfg.data.train)
    return azdata.resolve_source({"path": require(cfg, "corpus", show=show)["artifact"]}, None)


def eval_sets(
    cfg: Config, *, whole: bool = False
) -> tuple[dict[str, list[str]], dict[str, tuple[list[str], list[str]]], dict]:
    """The held-out sets and line-parallel pairs (normalized lines, order kept) and their resolved sources;
    ``whole``: every line of their files, ``skip_lines`` aside (what decontamination keeps out).

    Returns ``(eval_sets, parallel, resolved)``; ``resolved`` maps ``eval.<name>`` / ``parallel.<name>.<side>`` to
    the :class:`azllm.data.Resolved` of each input, for the sha256s in the report.
    """
    from ..text import normalize

    evals, parallel, resolved = {}, {}, {}
    for name, spec in cfg.data.eval.items():
        resolved[f"eval.{name}"] = r = resolve(cfg, spec, **({"skip_lines": 0} if whole else {}))
        evals[name] = list(azdata.iter_documents(r))
    for name, pair in cfg.data.parallel.items():
        sides = {}
        for side in ("az", "en"):
            resolved[f"parallel.{name}.{side}"] = r = resolve(
                cfg, getattr(pair, side), **({"skip_lines": 0} if whole else {})
            )
            sides[side] = [normalize(t) for t in azdata.source_lines(r)]
        if len(sides["az"]) != len(sides["en"]):
            raise azdata.DataError(
                f"parallel set {name!r}: {len(sides['az'])} Azerbaijani lines but {len(sides['en'])} English lines"
            )
        parallel[name] = (sides["az"], sides["en"])
    return evals, parallel, resolved


def removal_rows(manifest: dict) -> list[dict]:
    """Per source of the corpus stage's manifest (the total last): the input, what each step removed and what was
    kept, in documents (``docs``) and in MB (``mb``, 10**6 bytes), each with the share kept (``kept_pct``)."""
    from ..corpus.pipeline import STEPS

    by = manifest["counts"]["by_source"]
    rows = []
    for src in [s for s in by if s != "total"] + (["total"] if "total" in by else []):
        c, row = by[src], {"source": src}
        for unit, field, scale in (("docs", "docs", 1), ("mb", "bytes", 1e6)):
            r = {"input": c.get(f"input_{field}", 0) / scale}
            r.update({step: c.get(f"{step}_{field}", 0) / scale for step in STEPS})
            r["kept"] = c.get(f"kept_{field}", 0) / scale
            r["kept_pct"] = 100 * r["kept"] / r["input"] if r["input"] else 0.0
            row[unit] = r
        rows.append(row)
    return rows


def mix_rows(manifest: dict, mix: dict) -> list[dict]:
    """Per source: MB and share (%) of the cleaned corpus, the share of its sentences that the near-duplicate step
    dropped (and their MB), the documents that subsampling and caps left out, the mix rate (copies per document), MB
    and share of the mix (:func:`corpus_mix`)."""
    by = {k: v for k, v in manifest["counts"]["by_source"].items() if k != "total"}
    clean_total = sum(v.get("kept_bytes", 0) for v in by.values()) or 1
    mix_total = sum(v["bytes"] for v in mix["counts"].values()) or 1
    rows = []
    for s in sorted(by):
        c = mix["counts"].get(s, {})
        rows.append(
            {
                "source": s,
                "clean_mb": by[s].get("kept_bytes", 0) / 1e6,
                "clean_pct": 100 * by[s].get("kept_bytes", 0) / clean_total,
                "dropped_sentences_pct": 100 * c.get("dropped_sentences", 0) / max(c.get("sentences", 0), 1),
                "dropped_sentence_mb": c.get("dropped_sentence_bytes", 0) / 1e6,
                "subsampled_docs": c.get("subsampled_docs", 0),
                "capped_docs": c.get("capped_docs", 0),
                "rate": mix["rates"].get(s, 0.0),
                "mix_mb": c.get("bytes", 0) / 1e6,
                "mix_pct": 100 * c.get("bytes", 0) / mix_total,
            }
        )
    return rows


def sentence_filter_summary(mix: dict) -> str:
    """One sentence on the near-duplicate sentence step of :func:`corpus_mix`: sentences dropped, the filter's size
    and its measured false-positive rate against its bound."""
    sf = mix.get("sentence_filter")
    if not sf:
        return "Sentence near-duplicates are kept (corpus.mix.sentence_dedup is false)."
    c = mix["counts"].values()
    n, d = sum(x.get("sentences", 0) for x in c), sum(x.get("dropped_sentences", 0) for x in c)
    return (
        f"The near-duplicate sentence step dropped {d:,} of {n:,} sentences ({100 * d / max(n, 1):.2f}%). Its filter "
        f"holds {sf['added_3grams']:,} word 3-grams in {sf['mib']:.1f} MiB (sized for {sf['expected_3grams']:,}); "
        f"its false-positive rate at the end is {sf['false_positive']:.1e} (design {sf['design_false_positive']:g}, "
        f"the stage stops past {sf['max_false_positive']:g})."
    )
