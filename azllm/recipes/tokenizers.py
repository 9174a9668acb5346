"""The tokenizer study (notebook 01) and the run's main tokenizer.

Reads ``tokenizer``, ``baselines``, ``tokens.tokenizer``, ``data.lexicon`` and, through the corpus recipe, ``data``
and ``corpus``.

- :func:`training_source`, :func:`tokenizer_options`, :func:`sweep_options`, :func:`train_tokenizers`: the sweep;
- :func:`baselines`: every baseline tokenizer of the params (a local file under the data root, else its hub id);
- :func:`main_tokenizer`: the run's tokenizer, trained (or reused) and marked as the tokenizers stage's output
  (:func:`azllm.recipes.stages.mark`); :func:`run_tokenizer`: that output as later stages take it (token files,
  model), found by its marker (:func:`azllm.recipes.stages.require`), never by training;
- :func:`recipe_table`: "what each change bought": the same BPE trained on the corpus as found, then with each
  step of the corpus stage and each option added in turn (steps below);
- :func:`one_at_a_time_table`: each remaining choice alone (``tokenizer.sweep.one_at_a_time``) against the run's
  tokenizer at the selected size, in tokens per word, raw round trips (:func:`raw_eval_lines`) and morphology on
  the words and on the lexicon (:func:`lexicon_words`); :func:`frontier_points`: tokens per word against
  morphology recall; :func:`sample_leakage`: evaluation text in the training sample (none, when it works);
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
from collections import Counter
from pathlib import Path

from .. import data as azdata
from ..config import Config, OneChange
from ..data import DataError
from .corpus import clean_documents, corpus_source, held_out_lines
from .paths import Paths
from .sources import resolve
from .stages import mark, require

__all__ = [
    "training_source",
    "tokenizer_options",
    "sweep_options",
    "train_tokenizers",
    "baselines",
    "main_tokenizer",
    "run_tokenizer",
    "selected_tokenizer",
    "recipe_corpora",
    "recipe_table",
    "raw_eval_lines",
    "lexicon_words",
    "changed_config",
    "one_at_a_time_table",
    "frontier_points",
    "sample_leakage",
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
    """Keyword arguments of :func:`azllm.tokenizer_train.train_tokenizer` from ``tokenizer`` and the run's seed."""
    opts = cfg.tokenizer.model_dump(exclude={"max_bytes_per_file", "sweep"})
    return {**opts, "seed": cfg.seed, **over}


def sweep_options(cfg: Config) -> list[dict]:
    """Every combination of ``tokenizer.sweep``, as :func:`azllm.tokenizer_train.train_tokenizer` options."""
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
    from ..tokenizer_train import train_sweep

    paths = Paths.of(cfg)
    return train_sweep(
        docs, paths.tokenizers, sweep_options(cfg), sample=paths.tokenizer_sample, reuse=paths.tokenizer_notes
    )


def baselines(cfg: Config, names: list[str] | None = None) -> dict:
    """Every baseline tokenizer of the params (or those in ``names``), loaded by
    :func:`azllm.tokenizer.load_baseline`: its local ``path`` (under the data root) when it exists, else its
    ``hub`` id; a ``tiktoken`` entry reads tiktoken's cache from ``path``. A missing one raises."""
    from ..tokenizer import TokenizerError, load_baseline

    unknown = sorted(set(names or []) - set(cfg.baselines))
    if unknown:
        raise TokenizerError(f"no baseline named {unknown} in the params; baselines: {sorted(cfg.baselines)}")
    paths, out = Paths.of(cfg), {}
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


def main_tokenizer(cfg: Config, docs: list[str] | None = None, *, show=lambda line: None):
    """The run's tokenizer: ``tokens.tokenizer`` when set (any spec of :func:`azllm.tokenizer.load_tokenizer`,
    relative paths under the data root), else trained (or reused) with the ``tokenizer`` options on
    :func:`training_source` into :attr:`Paths.tokenizer`, from the same seeded sample of ``input_sentence_size``
    sentences as the sweep (:attr:`Paths.tokenizer_sample`, written once per input), and marked as the tokenizers
    stage's output. Pass ``docs`` (the training source's documents) to avoid reading the corpus again. This is the
    stage's builder (:data:`azllm.recipes.stages.BUILDERS`); later stages call :func:`run_tokenizer`."""
    from ..tokenizer import load_tokenizer
    from ..tokenizer_train import read_lines, train_tokenizer, write_sample

    spec = cfg.tokens.tokenizer
    if spec:
        return _given_tokenizer(cfg, spec)
    if docs is None:
        docs = azdata.iter_documents(training_source(cfg))
    opts = tokenizer_options(cfg)
    sample = Paths.of(cfg).tokenizer_sample
    write_sample(docs, sample, max_lines=opts["input_sentence_size"], seed=opts["seed"])
    folder = train_tokenizer(read_lines(sample), Paths.of(cfg).tokenizer, reuse=Paths.of(cfg).tokenizer_notes, **opts)
    mark(cfg, "tokenizers", folder, complete="tokenizer.json")
    return load_tokenizer(folder, name=f"{cfg.run_name}-main")


def run_tokenizer(cfg: Config, *, show=lambda line: None):
    """The run's tokenizer as every later stage takes it: ``tokens.tokenizer`` when set (loaded), else the
    tokenizers stage's output for these params, found by its marker (:func:`azllm.recipes.stages.require`; built by
    :func:`main_tokenizer` when there is none). ``show`` gets require's line."""
    from ..tokenizer import load_tokenizer

    spec = cfg.tokens.tokenizer
    if spec:
        return _given_tokenizer(cfg, spec)
    return load_tokenizer(require(cfg, "tokenizers", show=show)["artifact"], name=f"{cfg.run_name}-main")


def _given_tokenizer(cfg: Config, spec: str):
    from ..tokenizer import load_tokenizer

    local = Paths.of(cfg).existing(spec)
    return load_tokenizer(str(local) if local is not None else spec)


def selected_tokenizer(cfg: Config):
    """Our tokenizer of the study's selected size (``tokenizer.sweep.select_vocab_size``), when notebook 01
    trained it in this run's artifacts; else None."""
    from ..tokenizer import load_tokenizer
    from ..tokenizer_train import variant_name

    size = cfg.tokenizer.sweep.select_vocab_size or cfg.tokenizer.vocab_size
    name = variant_name({"model_type": cfg.tokenizer.model_type, "vocab_size": size})
    folder = Paths.of(cfg).tokenizers / name
    return load_tokenizer(folder, name=f"ours {name}") if (folder / "tokenizer.json").is_file() else None


def recipe_corpora(cfg: Config) -> list[tuple[str, list[str], dict]]:
    """``(step, documents, train_tokenizer options)`` of each step of the module docstring."""
    size = cfg.tokenizer.sweep.select_vocab_size or cfg.tokenizer.vocab_size
    opts = tokenizer_options(cfg, vocab_size=size, model_type="bpe", affix_presplit=False)
    cap = cfg.tokenizer.max_bytes_per_file
    raw = resolve(cfg, cfg.data.train, **({"max_bytes_per_file": cap} if cap is not None else {}))
    clean = clean_documents(cfg)
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
    value}``). Training seconds are those of the training that made the step's tokenizer
    (:func:`azllm.tokenizer_train.training_seconds`), also where it was copied from an identical earlier one."""
    from ..metrics import tokenizer_metrics
    from ..tokenizer import load_tokenizer
    from ..tokenizer_train import train_tokenizer, training_seconds

    rows, notes = [], Paths.of(cfg).tokenizer_notes
    for i, (step, docs, opts) in enumerate(recipe_corpora(cfg)):
        t0 = time.perf_counter()
        folder = train_tokenizer(docs, Paths.of(cfg).recipe_step(i), reuse=notes, **opts)
        row = {
            "step": step,
            "corpus_mb": sum(len(d.encode("utf-8")) for d in docs) / 1e6,
            "train_s": training_seconds(folder, notes) or time.perf_counter() - t0,
            "fertility": {},
            "roundtrip": {},
        }
        tok = load_tokenizer(folder, name=f"recipe-{i}")
        for name, lines in evals.items():
            m = tokenizer_metrics(tok, lines, morph=False)
            row["fertility"][name], row["roundtrip"][name] = m["fertility"], m["roundtrip"]
        rows.append(row)
    return rows


def raw_eval_lines(cfg: Config) -> dict[str, list[str]]:
    """Every eval set's non-empty lines as found, not normalized: what the raw round trip reads."""
    return {
        name: [t for t in azdata.source_lines(resolve(cfg, spec)) if t.strip()] for name, spec in cfg.data.eval.items()
    }


def lexicon_words(cfg: Config) -> Counter | None:
    """The UniMorph forms of ``data.lexicon`` (one word each, counted once): the words of the lexicon's
    morphology measure (:func:`azllm.metrics.morph_alignment`); None without ``data.lexicon``."""
    from ..lexicon import read_unimorph

    if cfg.data.lexicon is None:
        return None
    folder = Paths.of(cfg).under_root(cfg.data.lexicon) or Path(cfg.data.lexicon)
    return Counter(form for _, form, _ in read_unimorph(folder / LEXICON_FILES[0]) if " " not in form)


def changed_config(cfg: Config, change: OneChange) -> Config:
    """``cfg`` with one change of the one-at-a-time sweep: its ``tokenizer`` options and ``corpus.mix`` keys, each
    replaced whole (``{"weights": {}}``: no weights)."""
    d = cfg.to_dict()
    d["tokenizer"].update(change.tokenizer)
    d["corpus"]["mix"].update(change.mix)
    return Config.model_validate(d)


def one_at_a_time_table(
    cfg: Config, evals: dict[str, list[str]], raw: dict[str, list[str]], lexicon: Counter | None
) -> list[dict]:
    """The run's tokenizer at the selected size (first row, ``change`` "the run's tokenizer"), then each change of
    ``tokenizer.sweep.one_at_a_time`` alone. Per row: training seconds (as :func:`recipe_table`'s), tokens per word on
    every eval set (``fertility``, ``{set: value}``; on the lines as found for an ``encode_raw`` change), raw lines
    whose ``decode(encode(line))`` is not the line (``raw_roundtrip_failures``), morphology recall and precision on the
    first set's words (``morph_recall`` / ``morph_precision``) and on the lexicon's forms (``lexicon_recall`` /
    ``lexicon_precision``; None without a lexicon)."""
    from ..metrics import morph_alignment, roundtrip_failures, tokenizer_metrics
    from ..tokenizer import load_tokenizer
    from ..tokenizer_train import training_seconds
    from ..utils import progress

    size = cfg.tokenizer.sweep.select_vocab_size or cfg.tokenizer.vocab_size
    first = next(iter(evals))
    rows = []
    changes = [OneChange(name="the run's tokenizer"), *cfg.tokenizer.sweep.one_at_a_time]
    for i, change in enumerate(progress(changes, desc="one change at a time")):
        c = changed_config(cfg, change)
        t0 = time.perf_counter()
        folder = _train_one(c, change, Paths.of(cfg).one_change(i), size)
        tok = load_tokenizer(folder, name=f"one-{i}")
        lines = raw if change.encode_raw else evals
        trained_s = training_seconds(folder, Paths.of(cfg).tokenizer_notes)
        m = {name: tokenizer_metrics(tok, lines[name], morph=name == first) for name in evals}
        lex = morph_alignment(tok, lexicon) if lexicon else {}
        rows.append(
            {
                "change": change.name,
                "train_s": trained_s or time.perf_counter() - t0,
                "fertility": {name: v["fertility"] for name, v in m.items()},
                "raw_roundtrip_failures": {name: roundtrip_failures(tok, raw[name])[0] for name in raw},
                "morph_recall": m[first]["morph_recall"],
                "morph_precision": m[first]["morph_precision"],
                "lexicon_recall": lex.get("morph_recall"),
                "lexicon_precision": lex.get("morph_precision"),
            }
        )
    for r in rows:  # against the run's tokenizer
        r["fertility_delta"] = {ev: r["fertility"][ev] - rows[0]["fertility"][ev] for ev in evals}
    return rows


def frontier_points(one_rows: list[dict], sweep_rows: list[dict], eval_set: str, trained: set[str]) -> list[dict]:
    """Tokens per word and morphology recall on ``eval_set`` of every one-at-a-time row (``kind`` "one change")
    and every trained tokenizer of the sweep (``kind`` "sweep"), each marked ``on_frontier`` when no other point
    has both fewer tokens per word and more recall."""
    pts = [
        {
            "name": r["change"],
            "kind": "one change",
            "fertility": r["fertility"][eval_set],
            "morph_recall": r["morph_recall"],
        }
        for r in one_rows
        if r["morph_recall"] is not None
    ]
    pts += [
        {"name": r["tokenizer"], "kind": "sweep", "fertility": r["fertility"], "morph_recall": r["morph_recall"]}
        for r in sweep_rows
        if r["eval_set"] == eval_set and r["tokenizer"] in trained and r.get("morph_recall") is not None
    ]
    for p in pts:
        p["on_frontier"] = not any(
            q["fertility"] <= p["fertility"]
            and q["morph_recall"] >= p["morph_recall"]
            and (q["fertility"], q["morph_recall"]) != (p["fertility"], p["morph_recall"])
            for q in pts
        )
    return pts


def sample_leakage(cfg: Config) -> list[dict]:
    """Per held-out set (:func:`azllm.recipes.corpus.held_out_lines`), the lines of the tokenizer's training sample
    (:attr:`Paths.tokenizer_sample`) that share a word n-gram (``corpus.decontamination_n``; a short line whole)
    with it, as ``{"held_out", "sample_lines"}`` rows: 0 everywhere when no evaluation text reached the tokenizer."""
    from ..corpus.decontaminate import hits_by_set
    from ..tokenizer_train import read_lines

    c = cfg.corpus
    hits = hits_by_set(
        read_lines(Paths.of(cfg).tokenizer_sample),
        held_out_lines(cfg),
        n=c.decontamination_n,
        min_words=c.decontamination_min_words,
    )
    return [{"held_out": name, "sample_lines": n} for name, n in hits.items()]


def _train_one(cfg: Config, change: OneChange, folder: Path, size: int) -> Path:
    """One row's tokenizer: ``cfg``'s options at ``size`` on its text (the mix, or every cleaned document), from
    a seeded sample as the sweep's (the sweep's own file when the text is the run's)."""
    from ..tokenizer_train import read_lines, train_tokenizer, write_sample

    opts = tokenizer_options(cfg, vocab_size=size)
    if change.text == "cleaned" and cfg.corpus.enabled:
        docs = clean_documents(cfg)
    else:
        docs = azdata.iter_documents(training_source(cfg))
    sample = Paths.of(cfg).tokenizer_sample if not change.mix and change.text == "mix" else folder.with_suffix(".txt")
    write_sample(docs, sample, max_lines=opts["input_sentence_size"], seed=opts["seed"])
    return train_tokenizer(read_lines(sample), folder, reuse=Paths.of(cfg).tokenizer_notes, **opts)


def lexicon_check(cfg: Config) -> dict | None:
    """Agreement of :func:`azllm.morph.suffix_boundaries` with the UniMorph and hunspell lexicons of
    ``data.lexicon`` (:func:`azllm.lexicon.lexicon_agreement`); None when ``data.lexicon`` is None."""
    from ..lexicon import lexicon_agreement

    if cfg.data.lexicon is None:
        return None
    folder = Paths.of(cfg).under_root(cfg.data.lexicon) or Path(cfg.data.lexicon)
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
