"""The tokenizer study (notebook 01) and the run's main tokenizer.

Reads ``tokenizer``, ``baselines``, ``tokens.tokenizer``, ``data.lexicon`` and, through the corpus recipe, ``data``
and ``corpus``.

- :func:`training_source`, :func:`tokenizer_options`, :func:`sweep_options`, :func:`train_tokenizers`: the sweep;
- :func:`baselines`: every baseline tokenizer of the params (a local file under the data root, else its hub id);
- :func:`main_tokenizer`: the run's tokenizer (token files, model);
- :func:`recipe_table`: "what each change bought": the same BPE trained on the corpus as found, then with each
  step of the corpus stage and each option added in turn (steps below);
- :func:`lexicon_check`: the suffix inventory against the UniMorph and hunspell lexicons;
- :func:`text_sizes`: the sizes of the training corpus and the eval sets; :func:`best_summary`: the best tokenizer
  of the sweep, its fertility on every set, the target and the reference baselines beside it.

Steps of :func:`recipe_table` (each adds to the one before; ``superwords`` is reported apart, since its tokens are
no longer parts of one word and fertility stops comparing like with like):

1. ``as found``: ``data.train`` capped at ``tokenizer.max_bytes_per_file`` per file, SentencePiece's default
   script split (what azllm did before the corpus stage);
2. ``cleaned``: the corpus stage's output (quality, language, decontamination, exact and near duplicates), all of it;
3. ``cleaned + mix``: the ``corpus.mix`` the run uses (weights, sentence near-duplicates, caps);
4. ``+ no script split``: ``split_by_unicode_script: false`` (the run's tokenizer options);
5. ``+ superwords``: ``split_by_whitespace: false`` on top.
"""

from __future__ import annotations

import time
from pathlib import Path

from .. import data as azdata
from ..config import Config
from ..data import DataError
from .corpus import clean_documents, corpus_source, run_corpus
from .paths import Paths
from .sources import resolve

__all__ = [
    "training_source",
    "tokenizer_options",
    "sweep_options",
    "train_tokenizers",
    "baselines",
    "main_tokenizer",
    "selected_tokenizer",
    "recipe_corpora",
    "recipe_table",
    "lexicon_check",
    "text_sizes",
    "best_summary",
    "REFERENCE_TOKENIZERS",
]

REFERENCE_TOKENIZERS = ("llama3", "aztc-32k")
"""The baselines the report's answer puts beside the best tokenizer, when the run has them."""

LEXICON_FILES = ("unimorph_aze.tsv", "mozillaz_hunspell_az.dic", "mozillaz_hunspell_az.aff")


def training_source(cfg: Config) -> azdata.Resolved:
    """What tokenizers train on: the corpus recipe's source; without the corpus stage, ``data.train`` with
    ``tokenizer.max_bytes_per_file`` applied."""
    cap = cfg.tokenizer.max_bytes_per_file
    if cfg.corpus.enabled or cap is None:
        return corpus_source(cfg)
    return resolve(cfg, cfg.data.train, max_bytes_per_file=cap)


def tokenizer_options(cfg: Config, **over) -> dict:
    """Keyword arguments of :func:`azllm.tokenizer.train_tokenizer` from ``tokenizer`` and the run's seed."""
    opts = cfg.tokenizer.model_dump(exclude={"max_bytes_per_file", "sweep"})
    return {**opts, "seed": cfg.seed, **over}


def sweep_options(cfg: Config) -> list[dict]:
    """Every combination of ``tokenizer.sweep``, as :func:`azllm.tokenizer.train_tokenizer` options."""
    sweep = cfg.tokenizer.sweep
    return [
        tokenizer_options(cfg, vocab_size=v, model_type=m, affix_presplit=a)
        for m in sweep.model_types
        for a in sweep.affix_presplit
        for v in sweep.vocab_sizes
    ]


def train_tokenizers(cfg: Config, docs: list[str]) -> tuple[dict[str, Path], dict[str, str]]:
    """The sweep, trained (or reused) into :attr:`Paths.tokenizers` on one sample of ``docs``
    (:attr:`Paths.tokenizer_sample`, shared with :func:`main_tokenizer`): ``(trained, skipped)``."""
    from ..tokenizer import train_sweep

    return train_sweep(docs, Paths(cfg).tokenizers, sweep_options(cfg), sample=Paths(cfg).tokenizer_sample)


def baselines(cfg: Config, names: list[str] | None = None) -> dict:
    """Every baseline tokenizer of the params (or those in ``names``), loaded by
    :func:`azllm.tokenizer.load_baseline`: its local ``path`` (under the data root) when it exists, else its
    ``hub`` id; a ``tiktoken`` entry reads tiktoken's cache from ``path``. A missing one raises."""
    from ..tokenizer import TokenizerError, load_baseline

    unknown = sorted(set(names or []) - set(cfg.baselines))
    if unknown:
        raise TokenizerError(f"no baseline named {unknown} in the params; baselines: {sorted(cfg.baselines)}")
    paths, out = Paths(cfg), {}
    for name in cfg.baselines if names is None else names:  # in the order asked for
        entry = cfg.baselines[name]
        out[name] = load_baseline(
            name,
            local=paths.existing(entry.path) if entry.path else None,
            path=entry.path,
            hub=entry.hub,
            tiktoken=entry.tiktoken,
            data_root=paths.data_root,
        )
    return out


def main_tokenizer(cfg: Config, docs: list[str] | None = None):
    """The run's tokenizer (token files, model): ``tokens.tokenizer`` when set (any spec of
    :func:`azllm.tokenizer.load_tokenizer`, relative paths under the data root), else trained (or reused) with the
    ``tokenizer`` options on :func:`training_source` into :attr:`Paths.tokenizer`, from the same seeded sample of
    ``input_sentence_size`` sentences as the sweep (:attr:`Paths.tokenizer_sample`, written once per input). Pass
    ``docs`` (the training source's documents) to avoid reading the corpus again."""
    from ..tokenizer import load_tokenizer, read_lines, train_tokenizer, write_sample

    spec = cfg.tokens.tokenizer
    if spec:
        local = Paths(cfg).existing(spec)
        return load_tokenizer(str(local) if local is not None else spec)
    if docs is None:
        docs = azdata.iter_documents(training_source(cfg))
    opts = tokenizer_options(cfg)
    sample = Paths(cfg).tokenizer_sample
    write_sample(docs, sample, max_lines=opts["input_sentence_size"], seed=opts["seed"])
    folder = train_tokenizer(read_lines(sample), Paths(cfg).tokenizer, **opts)
    return load_tokenizer(folder, name=f"{cfg.run_name}-main")


def selected_tokenizer(cfg: Config):
    """Our tokenizer of the study's selected size (``tokenizer.sweep.select_vocab_size``), when notebook 01
    trained it in this run's artifacts; else None."""
    from ..tokenizer import load_tokenizer, variant_name

    size = cfg.tokenizer.sweep.select_vocab_size or cfg.tokenizer.vocab_size
    name = variant_name({"model_type": cfg.tokenizer.model_type, "vocab_size": size})
    folder = Paths(cfg).tokenizers / name
    return load_tokenizer(folder, name=f"ours {name}") if (folder / "tokenizer.json").is_file() else None


def recipe_corpora(cfg: Config) -> list[tuple[str, list[str], dict]]:
    """``(step, documents, train_tokenizer options)`` of each step of the module docstring."""
    size = cfg.tokenizer.sweep.select_vocab_size or cfg.tokenizer.vocab_size
    opts = tokenizer_options(cfg, vocab_size=size, model_type="bpe", affix_presplit=False)
    cap = cfg.tokenizer.max_bytes_per_file
    raw = resolve(cfg, cfg.data.train, **({"max_bytes_per_file": cap} if cap is not None else {}))
    clean = clean_documents(cfg, run_corpus(cfg))
    mixed = list(azdata.iter_documents(corpus_source(cfg)))
    script = {**opts, "split_by_unicode_script": True}
    return [
        ("as found", list(azdata.iter_documents(raw)), script),
        ("cleaned", clean, script),
        ("cleaned + mix", mixed, script),
        ("+ no script split", mixed, {**opts, "split_by_unicode_script": False}),
        ("+ superwords", mixed, {**opts, "split_by_unicode_script": False, "split_by_whitespace": False}),
    ]


def recipe_table(cfg: Config, evals: dict[str, list[str]]) -> list[dict]:
    """One row per step: corpus MB, training seconds, and fertility and round trip on every eval set (``{set:
    value}``)."""
    from ..metrics import tokenizer_metrics
    from ..tokenizer import load_tokenizer, train_tokenizer

    rows = []
    for i, (step, docs, opts) in enumerate(recipe_corpora(cfg)):
        t0 = time.perf_counter()
        folder = train_tokenizer(docs, Paths(cfg).recipe_step(i), **opts)
        row = {
            "step": step,
            "corpus_mb": sum(len(d.encode("utf-8")) for d in docs) / 1e6,
            "train_s": time.perf_counter() - t0,
            "fertility": {},
            "roundtrip": {},
        }
        tok = load_tokenizer(folder, name=f"recipe-{i}")
        for name, lines in evals.items():
            m = tokenizer_metrics(tok, lines, morph=False)
            row["fertility"][name], row["roundtrip"][name] = m["fertility"], m["roundtrip"]
        rows.append(row)
    return rows


def lexicon_check(cfg: Config) -> dict | None:
    """Agreement of :func:`azllm.morph.suffix_boundaries` with the UniMorph and hunspell lexicons of
    ``data.lexicon`` (:func:`azllm.lexicon.lexicon_agreement`); None when ``data.lexicon`` is None."""
    from ..lexicon import lexicon_agreement

    if cfg.data.lexicon is None:
        return None
    folder = Paths(cfg).under_root(cfg.data.lexicon) or Path(cfg.data.lexicon)
    files = [folder / n for n in LEXICON_FILES]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise DataError(f"data.lexicon: missing {missing}; set data.lexicon to the folder, or null")
    return lexicon_agreement(*files, sample=20000, seed=cfg.seed, top=10)


def text_sizes(docs: list[str], evals: dict[str, list[str]]) -> dict:
    """Documents, words, characters and bytes of the training corpus (``corpus``), lines and words of every eval
    set (``eval_sets``, by name)."""
    return {
        "corpus": {
            "documents": len(docs),
            "words": sum(len(d.split()) for d in docs),
            "characters": sum(len(d) for d in docs),
            "bytes": sum(len(d.encode()) for d in docs),
        },
        "eval_sets": {k: {"lines": len(v), "words": sum(len(x.split()) for x in v)} for k, v in evals.items()},
    }


def best_summary(cfg: Config, rows: list[dict], evals: dict, trained: dict) -> dict:
    """The best tokenizer of the sweep (:func:`azllm.metrics.best_variant`: the lowest fertility on the first eval
    set among the trained ones at ``tokenizer.sweep.select_vocab_size``, else ``tokenizer.vocab_size``): its name,
    vocabulary size and fertility on that set (``selected_on``) and on every set (``best_fertility_by_set``), the
    target (``tokenizer.sweep.fertility_target``) and whether it is reached, and the fertility of the
    :data:`REFERENCE_TOKENIZERS` the run has on the same set."""
    from ..metrics import best_variant

    first = next(iter(evals))
    vs = cfg.tokenizer.sweep.select_vocab_size or cfg.tokenizer.vocab_size
    best = best_variant(rows, first, vocab_size=vs, among=set(trained))
    on = {(r["tokenizer"], r["eval_set"]): r["fertility"] for r in rows}
    target = cfg.tokenizer.sweep.fertility_target
    return {
        "best": best["tokenizer"],
        "best_vocab_size": vs,
        "best_fertility": best["fertility"],
        "selected_on": best["eval_set"],
        "best_fertility_by_set": {ev: on[(best["tokenizer"], ev)] for ev in evals},
        "fertility_target": target,
        "target_reached": best["fertility"] <= target,
        "reference_fertility": {n: on[(n, first)] for n in REFERENCE_TOKENIZERS if (n, first) in on},
    }
