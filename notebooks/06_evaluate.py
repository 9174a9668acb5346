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
# # Downstream evaluation: does the adapted model know more Azerbaijani, and how much English did it lose?
#
# Bits per byte says how cheap a model is to train, not what it can do. This report scores the base of notebook
# 05 and every adaptation way (keep / extend / swap x full / LoRA) on Azerbaijani and English tasks with
# EleutherAI's **lm-evaluation-harness** (`azllm/evaluation/tasks/*.yaml`: SIB-200 topics, TUMLU-mini school exam
# questions, MMLU, FLORES translation by chrF++), plus a **linear probe** (a logistic regression on mean-pooled
# hidden states, SIB-200 train -> dev) that separates models too small to answer a question.
#
# - **Headline metric**: `acc` for multiple choice: the option whose text the model finds most likely (its summed
#   log-likelihood: the probability of the option's string, whatever the tokenizer cuts it into, so the ways compare).
#   `acc_norm` (per character) and `acc_mutual_info` (less each option's unconditional likelihood) are in the
#   base's table; on SmolLM2 only `acc` kept clear of chance in both languages (`azllm.evaluation.harness`).
#   chrF++ for translation, accuracy for the probe.
# - **Noise**: every score carries its standard error. A before -> after difference is a gain (▲) or a loss (▼)
#   only when it exceeds `evaluate.z` (1.96) standard errors of the difference, paired on the same items;
#   otherwise it is within noise (·).
# - **What is informative at which size**: a stand-in of about a million parameters sits at chance on every
#   multiple-choice task and near zero chrF++, so on this CPU run only bits per byte and the **probe** separate the
#   ways (its chance level is the majority class, what a model whose features carry nothing reaches). From about
#   100M parameters (SmolLM2-135M, `params/smollm2.yaml`) SIB-200 leaves chance; TUMLU and MMLU need ~1B+.
# - **The same few-shot examples for every model** (a seeded draw over the items in order) and each tokenizer's own
#   BOS convention (recorded below); `azllm eval PARAMS --model FOLDER` scores any one model the same way.

# %%
import pandas as pd
from IPython.display import display

from azllm import plots, recipes, report, tables
from azllm.recipes import adapt, evaluate
from azllm.recipes.paths import run_name

cfg = recipes.setup(params_file)
A, E = cfg.adapt, cfg.evaluate

# %% [markdown]
# ## The models: the base and every run of notebook 05
#
# Each run is notebook 05's (cached: nothing trains again when 05 ran) and is scored through its merged export,
# the folder a user would ship.

# %%
study = adapt.run_study(cfg)
base, base_tok, toks, runs = study.base, study.base_tok, study.toks, study.runs
before, after = evaluate.study(cfg, base, base_tok, runs, toks)
report.record(out_dir, "evaluate", {"base": before, "after": {run_name(w, m): r for (w, m), r in after.items()}})
for r in runs:  # each way's merged export (what was scored), for `azllm eval` and plain transformers
    report.record_artifact(
        out_dir,
        f"adapt_export/{run_name(r['way'], r['method'])}",
        adapt.export_run(cfg, r, base, base_tok, toks[r["way"]]),
    )
print(f"{len(after)} runs and the base scored; lm-eval {before['lm_eval']}")

# %% [markdown]
# ## The base
#
# Every task with its items, few-shot count, standard error and chance level.

# %%
pd.DataFrame(tables.score_rows(before)).set_index("task").style.format(tables.number, na_rep="—")

# %% [markdown]
# ## Before -> after, Azerbaijani tasks
#
# Per run: each task's score before (the base) -> after, the standard error of the difference, and the verdict;
# then the run's Azerbaijani bits per byte, tokens/s and wall time (from notebook 05).

# %%
rows = evaluate.before_after(cfg, before, after, runs)
report.record(out_dir, "evaluate", {"before_after": rows})
az = [t for t in E.az_tasks if t in before["tasks"]]
pd.DataFrame(tables.before_after_table(rows, az)).set_index(["way", "method"]).style.format(tables.number, na_rep="—")

# %% [markdown]
# ## Before -> after, English tasks (what adaptation cost)

# %%
en = [t for t in E.en_tasks if t in before["tasks"]]
pd.DataFrame(tables.before_after_table(rows, en)).set_index(["way", "method"]).style.format(tables.number, na_rep="—")

# %% [markdown]
# ## What each measure can detect
#
# Per task: its items, the median paired standard error of the runs' changes, the minimum detectable effect (the
# smallest true change these items would call a gain four times in five: 2.8 standard errors) and the largest change
# any run showed. A measure whose MDE exceeds every change a recipe can make needs more items, not more steps.

# %%
power = evaluate.power_rows(rows)
report.record(out_dir, "evaluate", {"power": power})
pd.DataFrame(power).set_index("task").style.format(tables.number, na_rep="—") if power else print("No task was scored.")

# %% [markdown]
# ## The ranking: Azerbaijani gain per device-hour
#
# One row per recipe, sorted by the gain of `evaluate.az_headline` per device-hour measured here (2 CPU cores),
# with the English change (`evaluate.en_headline`), the standard errors and verdicts, and what the same tokens would
# take on the GPU plan of `benchmark.job` (when `benchmark.job.tokens_per_s` is set).

# %%
rank = evaluate.ranking(cfg, rows, runs)
report.record(out_dir, "evaluate", evaluate.ranking_record(cfg, rank))
print(tables.ranking_sentence(rank, E.az_headline, E.en_headline))
pd.DataFrame(rank).set_index(["way", "method"]).style.format(tables.number, na_rep="—")

# %%
fig = plots.gain_vs_loss(rank)

# %% [markdown]
# ## What moved
#
# Every Azerbaijani and English task measure of every recipe whose change exceeds the noise; if none does, what the
# runs' own curves say it would take (an optimistic extrapolation, stated as such).

# %%
mv = evaluate.moved(cfg, before, rows, runs)
report.record(out_dir, "evaluate", {"moved": mv})
print(tables.moved_sentence(mv))

# %% [markdown]
# Score against training steps: Azerbaijani and English bits per byte through each run (notebook 05's curves).

# %%
fig = plots.adapt_curves(runs)

# %% [markdown]
# ## Conventions and contamination
#
# What each model's tokenizer does at the start of a text (lm-eval follows it), the few-shot pools, and how many
# training documents each evaluation set would remove on its own (the corpus stage removes them: every local task
# named in `evaluate.tasks` is added to its decontamination).

# %%
conv = evaluate.conventions(before, after)
report.record(out_dir, "evaluate", {"conventions": conv})
display(tables.conventions_table(conv))
contam = evaluate.contamination(cfg)
report.record(out_dir, "evaluate", {"contamination": contam, "fewshot_overlap": before["fewshot_overlap"]})
display(tables.contamination_table(contam))
display(pd.DataFrame(before["fewshot_overlap"]).T)
