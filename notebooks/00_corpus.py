# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python (azllm)
#     language: python
#     name: azllm
# ---

# %% [markdown]
# # The corpus: what was removed, what was kept, and what the tokenizer and the model will see
#
# Every number in the later reports depends on this text. The corpus stage (`azllm/corpus/`, run on HF
# datatrove's local executor over every core) reads `data.train`, then drops, in this order: documents that break a
# quality rule (Gopher/C4/FineWeb-style, `azllm/corpus/quality.py`), documents not in `corpus.languages`
# (`azllm/corpus/language.py`), documents sharing a long n-gram with an evaluation set
# (`azllm/corpus/decontaminate.py`), exact duplicates, and near duplicates (MinHash LSH). It then mixes the
# sources (`corpus.mix`): the tokenizer (01) and the token files (02) are made from that mix.

# %% tags=["parameters"]
# What to change: params_file (a params YAML, relative to the repository root) and out_dir (where this
# page's numbers go); the rest of the notebook reads them.
params_file = "params/tiny.yaml"
out_dir = "reports/tiny"

# %%
import pandas as pd
from IPython.display import Markdown, display

from azllm import plots, recipes, report, tables
from azllm.corpus import contents
from azllm.data import iter_documents
from azllm.recipes import corpus, sources, tokenizers
from azllm.recipes.paths import Paths

cfg = recipes.setup(params_file)
paths = Paths.of(cfg)
raw = sources.resolve(cfg, cfg.data.train)
report.record_inputs(out_dir, "train", raw)
print("data root:", paths.data_root or "none (hub sources)", "| input:", raw.describe())

# %% [markdown]
# ## Running the stage
# Cached: a re-run with the same inputs (sha256) and settings reads the manifest and does nothing. A killed run
# resumes its unfinished tasks; its folder has no manifest until the end, so it is never taken as finished.

# %%
manifest = corpus.run_corpus(cfg)
folder = paths.corpus(manifest["key"])
perf = manifest["performance"]
report.record(out_dir, "corpus", {k: manifest[k] for k in ("key", "inputs", "settings", "counts", "performance")})
report.record_artifact(out_dir, "corpus", folder)
print(
    f"corpus {manifest['key']}: {perf['input_mb']:.1f} MB in {perf['seconds']:.0f} s on {perf['workers']} "
    f"workers = {perf['mb_per_s_per_core']:.2f} MB/s per core (15 GB on 16 cores at this rate, a straight line: "
    f"{perf['hours_for_15gb_on_16_cores']:.1f} h; the measured growth to 1 GB is docs/scale.md); peak memory "
    f"{perf['peak_rss_mib_child']:.0f} MiB per worker"
)

# %% [markdown]
# ## What each step removed
# Documents, then MB, per source. Steps run in the column order; a document counts in the first step that drops it.

# %%
removed = corpus.removal_rows(manifest)
docs_table, mb_table = tables.corpus_table(removed, "docs"), tables.corpus_table(removed, "mb")
display(Markdown("**documents**"), docs_table, Markdown("**MB**"), mb_table.style.format(tables.number, na_rep="—"))
fig = plots.corpus_removed(removed)

# %% [markdown]
# ## Examples of removed and kept text
# A few documents per step and reason (the rule that fired), drawn with a fixed seed, and a few that were kept.

# %%
with pd.option_context("display.max_colwidth", None):
    display(pd.DataFrame(contents.examples(folder, seed=cfg.seed)))

# %% [markdown]
# ## The biggest near-duplicate clusters
# One document of each cluster is kept. Cluster members agree on most word 5-grams (estimated Jaccard similarity
# ≳ 0.72 with the default MinHash settings).

# %%
big = contents.clusters(folder)
report.record(out_dir, "corpus", {"clusters": big})
with pd.option_context("display.max_colwidth", None):
    display(pd.DataFrame(big))

# %% [markdown]
# ## The language mix
# Labels of every document that reached language identification (`azllm/corpus/language.py`: fastText's bundled
# lid.176 with script rules and lingua's second say; `az`, `az-Cyrl`, `az-Arab`, one label per neighbour language,
# `other`, `unknown`); only `corpus.languages` are kept.

# %%
langs = pd.Series(manifest["counts"]["languages"], name="documents")
display(langs.to_frame().T)

# %% [markdown]
# ## Decontamination
# A training document is dropped when it shares a word n-gram with a line of an evaluation set (n below), or holds a
# shorter evaluation line whole. The same check runs on any held-out set: `azllm.corpus.find_contamination`.

# %%
evals, parallel, _ = corpus.eval_sets(cfg)
hits = contents.contamination_hits(folder, {**evals, **{f"{k}.az": v[0] for k, v in parallel.items()}})
n_hits = manifest["counts"]["by_source"]["total"].get("decontamination_docs", 0)
report.record(out_dir, "corpus", {"decontamination_hits": n_hits, "decontamination_n": cfg.corpus.decontamination_n})
print(f"{n_hits} training documents share a {cfg.corpus.decontamination_n}-gram with an evaluation line")
display(pd.DataFrame(hits, columns=["source", "training text", "eval set", "eval line"]))

# %% [markdown]
# ## The mix
# Share of each source before and after `corpus.mix` (rate: copies per document; below 1 subsampled), and what each
# step of the mix left out: near-duplicate sentences, documents that subsampling or a cap skipped.

# %%
mix_path, mix = corpus.corpus_mix(cfg, manifest)
mix_rows = corpus.mix_rows(manifest, mix)
report.record(out_dir, "corpus", {"mix": mix_rows, "sentence_filter": mix.get("sentence_filter")})
print(corpus.sentence_filter_summary(mix))
display(tables.mix_table(mix_rows))

# %% [markdown]
# ## Size before and after
# Documents, words, MB and tokens (with the `corpus.count_with` baseline tokenizer) of the input, the cleaned corpus
# and the mix.

# %%
count_tok = next(iter(tokenizers.baselines(cfg, [cfg.corpus.count_with]).values())) if cfg.corpus.count_with else None
sizes = {
    "input": contents.size_counts(iter_documents(raw), count_tok),
    "cleaned": contents.size_counts((r["text"] for r in contents.read_jsonl(folder / "clean")), count_tok),
    "mix": contents.size_counts((r["text"] for r in contents.read_jsonl(mix_path)), count_tok),
}
report.record(out_dir, "corpus", {"sizes": sizes})
display(pd.DataFrame(sizes).T.rename(columns=tables.LABELS))
