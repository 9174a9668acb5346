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
# # Tokenizers for Azerbaijani: how many tokens per word?
#
# Every extra token per word costs training compute, context length and money. This report trains SentencePiece
# tokenizers on the run's Azerbaijani corpus (the mix written by 00_corpus; a sweep over vocabulary size, unigram
# vs BPE, with and without an
# affix-aware pre-split), measures them and the baseline tokenizers of well-known models on held-out sets, and picks
# the best one at the run's vocabulary size.
#
# Definitions of every metric: `azllm/metrics.py`; normalization and the definition of "word": `azllm/text.py`;
# the suffix inventory: `azllm/morph.py`.

# %% tags=["parameters"]
# What to change: params_file (a params YAML, relative to the repository root) and out_dir (where this
# page's numbers go); the rest of the notebook reads them.
params_file = "params/tiny.yaml"
out_dir = "reports/tiny"

# %%
import pandas as pd
from IPython.display import Markdown, display

from azllm import data, metrics, plots, recipes, report, tables, tokenizer_tables
from azllm.recipes import corpus, tokenizers
from azllm.recipes.paths import Paths
from azllm.tokenizer import load_tokenizer

cfg = recipes.setup(params_file)
train_src = tokenizers.training_source(cfg)
print("data root:", Paths.of(cfg).data_root or "none (hub sources)", "| training corpus:", train_src.describe())
report.record_inputs(out_dir, "train", train_src)

# %% [markdown]
# ## The corpus and the held-out sets
# Documents are normalized (`azllm.text.normalize`) before training and before measuring.

# %%
docs = list(data.iter_documents(train_src))
evals, parallel, resolved = corpus.eval_sets(cfg)
for name, r in resolved.items():
    report.record_inputs(out_dir, name, r)
sizes = tokenizers.text_sizes(docs, evals)
report.record(out_dir, "tokenizers", sizes)
display(pd.DataFrame([sizes["corpus"]], index=["training corpus"]), pd.DataFrame(sizes["eval_sets"]).T)

# %% [markdown]
# ## Training the sweep
# Every combination of `tokenizer.sweep` in the params; unchanged variants are reused from the artifacts folder.

# %%
trained_paths, skipped = tokenizers.train_tokenizers(cfg, docs)
main_tok = tokenizers.main_tokenizer(cfg, docs=docs)
trained = {name: load_tokenizer(path, name=name) for name, path in trained_paths.items()}
baselines = tokenizers.baselines(cfg)
report.record(out_dir, "tokenizers", {"skipped": skipped})
report.record_artifact(out_dir, "tokenizer", main_tok.path)
for name, path in trained_paths.items():
    report.record_artifact(out_dir, f"tokenizers/{name}", path)
for name, why in skipped.items():
    print(f"not trained: {name}: {why}")
print(f"{len(trained)} trained, {len(baselines)} baselines")

# %% [markdown]
# ## No evaluation text in the training sample
# Lines of the tokenizers' training sample that share a 13-word sequence (a short line: the whole line) with each
# held-out set: the sets the tokenizer is selected on, the parallel sets and the tasks' texts. The corpus stage
# removes such documents; this counts what reached the tokenizer.

# %%
leakage = tokenizers.sample_leakage(cfg)
report.record(out_dir, "tokenizers", {"sample_leakage": leakage})
display(pd.DataFrame(leakage).set_index("held_out").T.rename(index={"sample_lines": "sample lines sharing text"}))

# %% [markdown]
# ## Every tokenizer on every held-out set
#
# `parity` (tokens of a line over tokens of its English translation) needs a line-parallel English side: a set
# without one (`data.parallel`) shows "—" there.

# %%
rows = metrics.evaluate({**trained, **baselines}, evals, parallel)
report.record(out_dir, "tokenizers", {"table": rows})
for ev, table in tokenizer_tables.tokenizer_tables(rows).items():
    display(Markdown(f"**{ev}** (sorted by fertility)"), table.style.format(tables.number, na_rep="—"))

# %% [markdown]
# ## Fertility against vocabulary size
# Solid lines: plain SentencePiece; dashed: with the affix-aware pre-split, where no piece may cross a suffix
# boundary that the inventory predicts.

# %%
first_eval = next(iter(evals))
fig = plots.fertility_vs_vocab(rows, first_eval, trained=set(trained))

# %% [markdown]
# ## Our best tokenizer at the selected vocabulary size against every baseline

# %%
best = tokenizers.best_summary(cfg, rows, evals, trained)
fig = plots.best_vs_baselines(
    rows,
    best["selected_on"],
    [best["best"], *baselines],
    highlight=best["best"],
    target=best["fertility_target"],
)
print(tokenizer_tables.best_sentence(best))

# %% [markdown]
# ## What each change bought
# The same BPE tokenizer at the selected vocabulary size, trained on the corpus as found, then with each step of
# the corpus stage (00_corpus) and each tokenizer option added in turn (`azllm.recipes.tokenizers.recipe_corpora`
# says what each step is).
# Superwords (pieces across spaces) are shown apart: their tokens are no longer parts of one word.

# %%
recipe = tokenizers.recipe_table(cfg, evals)
report.record(out_dir, "tokenizers", {"recipe": recipe})
display(tokenizer_tables.recipe_table(recipe).style.format(tables.number, na_rep="—"))

# %% [markdown]
# ## Each remaining choice alone
# The run's tokenizer at the selected size, then the same BPE with one change only (`tokenizer.sweep.one_at_a_time`
# in the params): what it does to tokens per word (Δ against the run's tokenizer), to the raw round trip (eval lines
# as found, not normalized, that `decode(encode(line))` does not give back) and to morphology (recall and precision
# of suffix boundaries on the first set's words and on the UniMorph lexicon's forms).

# %%
raw_evals = tokenizers.raw_eval_lines(cfg)
one = tokenizers.one_at_a_time_table(cfg, evals, raw_evals, tokenizers.lexicon_words(cfg))
report.record(out_dir, "tokenizers", {"one_at_a_time": one})
display(tokenizer_tables.one_at_a_time_table(one).style.format(tables.number, na_rep="—"))

# %% [markdown]
# ## Tokens per word against morphology
# Every tokenizer of this page: fewer tokens per word, or cuts that follow suffixes? The line joins the tokenizers
# that no other beats on both.

# %%
points = tokenizers.frontier_points(one, rows, first_eval, set(trained))
report.record(out_dir, "tokenizers", {"frontier": points})
fig = plots.fertility_vs_morph(points, first_eval, target=best["fertility_target"])

# %% [markdown]
# ## Lossless round trip and the exported Hugging Face tokenizer
# For the best tokenizer, on every dev line: `decode(encode(x)) == x` for the normalized `x` and for the line as
# found (`(as found)`), and the exported folder loaded with `transformers.AutoTokenizer` (offline) gives exactly the
# SentencePiece ids. `normalized away`: the lines that `azllm.text.normalize` changes (apostrophes, Cyrillic ә,
# dashes, spaces), which cannot be inverted: encode the line as found to keep them.

# %%
checks = metrics.export_checks(
    trained[best["best"]],
    trained_paths[best["best"]],
    {
        **evals,
        **{f"{k}.en": v[1] for k, v in parallel.items()},
        **{f"{k} (as found)": v for k, v in raw_evals.items()},
    },
)
report.record(out_dir, "tokenizers", {**best, "checks": checks})
display(pd.DataFrame(checks).T)

# %% [markdown]
# ## How the tokenizers cut long words
# Pieces separated by `·`; `_` marks a word start; the token count in brackets.

# %%
every = {**trained, **baselines}
shown = [n for n in (best["best"], best["best"] + "-affix", *baselines) if n in every]
seg = metrics.segmentations({n: every[n] for n in shown}, cfg.report.long_words)
report.record(out_dir, "tokenizers", {"segmentations": seg})
with pd.option_context("display.max_colwidth", None):
    display(pd.DataFrame(seg))

# %% [markdown]
# ## The suffix inventory against the lexicons
# `azllm/morph.py` predicts suffix boundaries; UniMorph forms and hunspell-generated forms give an independent
# reference for the stem boundary. Recall: share of reference boundaries predicted; precision: share of forms whose
# first predicted cut is the stem boundary (hunspell stems are often derived words, so early cuts are expected).

# %%
lex = tokenizers.lexicon_check(cfg)
report.record(out_dir, "tokenizers", {"lexicon": lex})
keys = ("n", "recall", "precision")
display(pd.DataFrame({s: {k: lex[s][k] for k in keys} for s in ("unimorph", "hunspell", "overall")}).T)
display(pd.DataFrame(lex["unimorph"]["misses"], columns=["suffix", "count", "example"]).head(10))

# %% [markdown]
# ## What the affix-aware pre-split buys and costs
# `morph_recall`: share of predicted suffix boundaries that are token boundaries; `morph_precision`: share of
# word-internal token boundaries that are predicted suffix boundaries. The pre-split should raise both, at the cost
# of more tokens per word.

# %%
pairs = metrics.affix_comparison(rows, first_eval, trained)
report.record(out_dir, "tokenizers", {"affix_presplit": pairs})
display(pd.DataFrame(pairs).set_index("variant").style.format(tables.number, na_rep="—"))
