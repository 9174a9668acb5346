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

# %% tags=["parameters"]
# What to change: params_file (a params YAML, relative to the repository root) and out_dir (where this
# page's numbers go); the rest of the notebook reads them.
params_file = "params/tiny.yaml"
out_dir = "reports/tiny"

# %% [markdown]
# # Adapting a pretrained base to Azerbaijani: keep, extend or swap the vocabulary, and what English loses
#
# Most users start from a pretrained base (Llama-3.2-1B, Qwen, Gemma). This report teaches a base Azerbaijani
# three ways and measures each: **keep** its tokenizer, **extend** it with Azerbaijani tokens
# (`azllm.vocab.extend_tokenizer`: real merges appended after the base's, every base id unchanged), or **swap**
# in our Azerbaijani tokenizer (every row new, initialised as the mean of the base pieces). Each way is trained
# with full fine-tuning and with LoRA, whose new token rows are made trainable (`model.new_rows`).
#
# On this machine the base is a small English Llama pretrained here (`adapt.base: null`), a stand-in for a real
# one; `params/gpu_adapt.yaml` runs the same study on `meta-llama/Llama-3.2-1B`. **Equal compute**: every run takes
# the same steps of the same batch x block tokens; a token covers more Azerbaijani text after extend or swap.
# **Bits per byte** compares across tokenizers.

# %%
from azllm import plots, recipes, report, tables
from azllm.data import iter_documents
from azllm.recipes import adapt, corpus, sources

cfg = recipes.setup(params_file)
A = cfg.adapt

# %% [markdown]
# ## The base

# %%
study = adapt.run_study(cfg, train=False)
base, base_tok, pre, docs, toks = study.base, study.base_tok, study.pre, study.docs, study.toks
if pre is not None:
    report.record(out_dir, "adapt", {"base": {k: pre["final"]["en"][k] for k in ("loss", "bpb")}})
    print(
        f"study base: {pre['parameters']['total']:,} parameters, {pre['steps']} steps on English, "
        f"English bpb {pre['final']['en']['bpb']:.3f}; tokenizer {base_tok.name} ({base_tok.vocab_size} ids)"
    )
else:
    print(f"base {base}, tokenizer {base_tok.vocab_size} ids")

# %% [markdown]
# ## The three tokenizers
#
# Tokens per word on the held-out sets, and the share of English tokens (held-out English) that each one changes
# against the base's (keep: 0 by definition; extend: the goal is under 1%).

# %%
english = list(iter_documents(sources.resolve(cfg, A.english_eval)))
evals, _, _ = corpus.eval_sets(cfg)
tok_rows = adapt.tokenizer_rows(toks, base_tok, evals, english)
report.record(out_dir, "adapt", {"tokenizers": tok_rows})
tables.adapt_tokenizer_table(tok_rows).style.format(tables.number, na_rep="—")

# %% [markdown]
# ## Extending real base tokenizers
#
# `adapt.extend_bases` (baseline tokenizers) extended by each of `adapt.extend_sizes` Azerbaijani tokens learned on
# the training corpus: tokens per word next to the base (n_new = 0) and to our own tokenizer at the selected size
# (when notebook 01 trained it in this run), lossless round trips, English tokens changed.

# %%
ext_rows = adapt.extension_table(cfg, evals, english, docs) if A.extend_bases else []
report.record(out_dir, "adapt", {"extension_table": ext_rows})
tables.extension_table(ext_rows).style.format(tables.number, na_rep="—") if ext_rows else print(
    "No base tokenizer to extend is named in this run (adapt.extend_bases lists none)."
)

# %% [markdown]
# ## What the model reads
#
# Every way trains on the same text: the first `adapt.az_train_bytes` of the training corpus, each file capped at
# `adapt.az_bytes_per_file` so that one large genre (law is 44% of the shared corpus) cannot fill the budget, and
# `adapt.replay` of replayed text (`adapt.replay_source`, English by default) spread among the documents to keep what
# the base knows. Each origin's share of the bytes:

# %%
_, genres = adapt.training_text(cfg)
report.record(out_dir, "adapt", {"genres": genres})
fig = plots.genre_shares(genres)
tables.genre_table(genres).style.format(tables.number, na_rep="—")

# %% [markdown]
# ## Adapting: every way, full fine-tuning and LoRA
#
# Evaluated before the first step (step 0: the base, with its new rows initialised) and every `adapt.eval_steps`.

# %%
results = adapt.run_study(cfg).runs
runs = adapt.runs_record(cfg, results, tok_rows)
report.record(out_dir, "adapt", runs)
tables.adapt_table(runs["runs"]).style.format(tables.number, na_rep="—")

# %%
fig = plots.adapt_curves(results)

# %% [markdown]
# ## Does it still learn at the last step, and what would one more hour buy?
#
# Each run's curves read forward (`azllm.curves.forecast`): the fall over the last evaluation interval, the line
# `bpb = a + b ln(step)` fitted to the second half of the run, and that line read one more hour of the run's own
# measured step time later, on this machine. An estimate, not a measurement: it assumes a run given the extra steps
# (its schedule stretched to match) follows the second half's line. The line has no floor while a real curve
# flattens: the further it reaches past the measured steps ("x the measured steps"), the more it promises, and past
# about 2x it is a guess.

# %%
more = adapt.more_time(results)
report.record(out_dir, "adapt", {"one_more_hour": more})
fig = plots.more_time(results, more)
tables.more_time_table(more).style.format(tables.number, na_rep="—")

# %% [markdown]
# ## A standalone export
#
# The LoRA run of the extend way, its adapter and trained token rows merged into the base, saved as one folder
# that plain `transformers` loads offline (`azllm.export`); its logits equal the adapter model's (tested).

# %%
lora_ext = next((r for r in results if r["method"] == "lora" and r["way"] == "extend"), None)
if lora_ext is not None:
    folder = adapt.export_run(cfg, lora_ext, base, base_tok, toks["extend"])
    report.record_artifact(out_dir, "adapt_export", folder)
    print("exported:", folder, sorted(p.name for p in folder.iterdir()))
