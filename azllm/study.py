"""The run layer of the tokenizer study's "what each change bought" table (notebook 01): the same BPE tokenizer
trained on the corpus as found, then with each step of the corpus stage and each option added in turn.

Steps (each adds to the one before; ``superwords`` is reported apart, since its tokens are no longer parts of one
word and fertility stops comparing like with like):

1. ``as found``: ``data.train`` capped at ``tokenizer.max_bytes_per_file`` per file, SentencePiece's default
   script split (what azllm did before the corpus stage);
2. ``cleaned``: the corpus stage's output (quality, language, decontamination, exact and near duplicates), all of it;
3. ``cleaned + mix``: the ``corpus.mix`` the run uses (weights, sentence near-duplicates, caps);
4. ``+ no script split``: ``split_by_unicode_script: false`` (the run's tokenizer options);
5. ``+ superwords``: ``split_by_whitespace: false`` on top.

>>> rows = recipe_table(cfg, evals)  # doctest: +SKIP
"""

from __future__ import annotations

import time

from . import data as azdata
from . import run
from .config import Config

__all__ = ["recipe_corpora", "recipe_table", "lexicon_check"]


def recipe_corpora(cfg: Config) -> list[tuple[str, list[str], dict]]:
    """``(step, documents, train_tokenizer options)`` of each step of the module docstring."""
    from .corpus import in_input_order

    vs = cfg.tokenizer.sweep.select_vocab_size or cfg.tokenizer.vocab_size
    opts = run.tokenizer_options(cfg, vocab_size=vs, model_type="bpe", affix_presplit=False)
    cap = cfg.tokenizer.max_bytes_per_file
    raw = run.resolve(cfg, cfg.data.train, **({"max_bytes_per_file": cap} if cap is not None else {}))
    manifest = run.corpus(cfg)
    clean = [r["text"] for r in in_input_order(run.artifacts_dir(cfg) / "corpus" / manifest["key"] / "clean")]
    mixed = list(azdata.iter_documents(run.corpus_source(cfg)))
    script = {**opts, "split_by_unicode_script": True}
    return [("as found", list(azdata.iter_documents(raw)), script), ("cleaned", clean, script),
            ("cleaned + mix", mixed, script), ("+ no script split", mixed, {**opts, "split_by_unicode_script": False}),
            ("+ superwords", mixed, {**opts, "split_by_unicode_script": False, "split_by_whitespace": False})]


def recipe_table(cfg: Config, evals: dict[str, list[str]]) -> list[dict]:
    """One row per step: corpus MB, training seconds, and fertility and round trip on every eval set."""
    from .metrics import tokenizer_metrics
    from .tokenizer import load_tokenizer, train_tokenizer

    rows = []
    for i, (step, docs, opts) in enumerate(recipe_corpora(cfg)):
        t0 = time.perf_counter()
        folder = train_tokenizer(docs, run.artifacts_dir(cfg) / "recipe" / f"step{i}", **opts)
        row = {"step": step, "corpus MB": sum(len(d.encode("utf-8")) for d in docs) / 1e6,
               "train s": time.perf_counter() - t0}
        tok = load_tokenizer(folder, name=f"recipe-{i}")
        for name, lines in evals.items():
            m = tokenizer_metrics(tok, lines, morph=False)
            row[f"{name} fertility"], row[f"{name} roundtrip"] = m["fertility"], m["roundtrip"]
        rows.append(row)
    return rows


def lexicon_check(cfg: Config) -> dict | None:
    """Agreement of :func:`azllm.morph.suffix_boundaries` with the UniMorph and hunspell lexicons of
    ``data.lexicon`` (:func:`azllm.lexicon.lexicon_agreement`); None when ``data.lexicon`` is None."""
    from pathlib import Path

    from .lexicon import lexicon_agreement

    if cfg.data.lexicon is None:
        return None
    folder = Path(cfg.data.lexicon)
    root = run.data_root(cfg)
    folder = folder if folder.is_absolute() or root is None else root / folder
    files = [folder / n for n in ("unimorph_aze.tsv", "mozillaz_hunspell_az.dic", "mozillaz_hunspell_az.aff")]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise azdata.DataError(f"data.lexicon: missing {missing}; set data.lexicon to the folder, or null")
    return lexicon_agreement(*files, sample=20000, seed=cfg.seed, top=10)
