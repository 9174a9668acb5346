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
# # Preference tuning: the SFT model optimised on preferences, judged on held-out answers
#
# The last stage of the cycle: TRL's `DPOTrainer` (or `KTOTrainer`, `preference.method`) on the SFT model of
# notebook 07 (or `preference.base`), with LoRA, QLoRA or full fine-tuning as for SFT, then one merged folder
# (`azllm.recipes.prefer`, every number under `preference` in `metrics.json`; `azllm prefer PARAMS` runs the same).
#
# Azerbaijani has no preference set, so the pairs are built: a reference answer chosen over the SFT model's own
# greedy answer to the same prompt (on-policy, as SPIN and SeaLLM do), and a native answer chosen over a
# machine-translated one where a prompt has both. A user's own pairs (`preference.sources`, TRL's formats) come
# first. Pairs overlapping a held-out conversation or an evaluation text are dropped.
#
# In the default report the base is the ~1M-parameter stand-in, so the numbers show that the stage runs, not that
# it helps; `params/gpu_dpo.yaml` runs it on Llama-3.2-1B on one GPU.

# %%
import pandas as pd
from IPython.display import display

from azllm import plots, recipes, report, tables
from azllm.recipes import evaluate, prefer

cfg = recipes.setup(params_file)
P = cfg.preference

# %% [markdown]
# ## The run
#
# The SFT model is the reference: with LoRA, the model with its adapter disabled. The run resumes from its newest
# checkpoint when interrupted, and a finished run with the same data and settings is read back, not trained again.

# %%
run = prefer.prefer_command(cfg)
rec = prefer.page_record(run)
report.record(out_dir, "preference", rec)
if rec["export"]:
    report.record_artifact(out_dir, "preference_export", rec["export"])
print(
    f"{rec['method'].upper()} ({rec['train_method']}, beta {P.beta}, SFT weight {P.sft_weight}) from {rec['base']}: "
    f"{rec['steps']} steps in {rec['seconds']:.0f} s"
)

# %% [markdown]
# ## The pairs
#
# What each source gave, what decontamination dropped, and each source's share of the training pairs. The held-out
# pairs are built the same way from the SFT stage's held-out conversations and never trained on.

# %%
with pd.option_context("display.max_colwidth", None):
    display(pd.DataFrame(rec["pairs"]).set_index("step").style.format(tables.number, na_rep="—"))

# %%
fig = plots.preference_curves(run["run"])

# %% [markdown]
# ## Does it help? The held-out judgement
#
# - **Preference accuracy**: the share of held-out pairs whose implicit reward margin (the policy's log-ratio to
#   the reference, chosen over rejected) is positive; chance is 0.5, and the verdict is a binomial test against it.
# - **chrF++** of the held-out answers, paired against the SFT model's answers to the same prompts; a gain (▲) or
#   loss (▼) only beyond 1.96 paired standard errors.
# - **Loop rate** and **empty answers** (answers with no word), paired, lower is better: a loop rate that falls
#   because the answers vanished shows as a rise in empty answers.
# - **English bits per byte** on held-out English text (`adapt.english_eval`, trained and replayed by no stage),
#   paired over its documents, lower is better: the English guard a preference sweep chooses with, on text that
#   no verdict reads.
# - **Mean answer words** before and after: DPO lengthens answers, and a chrF++ change that comes from length alone
#   shows here.

# %%
print(
    f"Preference accuracy {rec['preference_accuracy']['accuracy']:.3f} on {rec['preference_accuracy']['n']} "
    f"held-out pairs ({rec['accuracy_verdict']} against chance 0.5)."
)
display(pd.DataFrame(rec["judgement"]).set_index("measure").style.format(tables.number, na_rep="—"))

# %% [markdown]
# ## Answers beside the SFT model's and the reference
#
# Greedy answers to held-out instructions with the chat template.

# %%
with pd.option_context("display.max_colwidth", None):
    display(tables.samples_table(rec["samples"]))

# %% [markdown]
# ## Tasks before and after
#
# Notebook 06's Azerbaijani and English tasks (`evaluate.tasks` and the probe) on the SFT model and on the
# preference-tuned export, paired, each with its standard error: the English ones are the retention check.

# %%
if rec["export"]:
    before, after = evaluate.score_pair(cfg, rec["base"], rec["export"])
    pair = evaluate.pair_rows(cfg, before, after)
    report.record(out_dir, "preference", {"tasks_before_after": pair})
    print(tables.pair_sentence([*pair, rec["chrf"]] if rec["chrf"] else pair, cfg.evaluate.z))
    display(pd.DataFrame(pair).set_index("task").style.format(tables.number, na_rep="—"))
else:
    print("preference.export is off: the preference-tuned model is not scored on the tasks.")

# %% [markdown]
# ## The cycle's last model against the original base
#
# The question of the whole cycle: is the preference-tuned model a better Azerbaijani assistant than the model it
# started from (`adapt.base`), and no worse at English? The original base, the SFT model and the preference export
# answer the same held-out native instructions (the verdict split with `sft.verdict_size`) with the same decoding,
# and are scored on the same tasks; each stage is paired against the original and against the stage before. The
# chance column is what a model that does nothing scores: each instruction echoed as its answer, each FLORES source
# copied as its translation. None of it is trained again: notebook 07's answers and 06's scores are read back.

# %%
against = prefer.against_original(cfg, rec)
if against is None:
    print("No original base to compare with (sft.base names the base, the stand-in, or preference.export is off).")
else:
    report.record(out_dir, "preference", {"against_original": against})
    print(tables.pair_sentence(against["rows"], cfg.evaluate.z))
    display(pd.DataFrame(against["rows"]).set_index("task").style.format(tables.number, na_rep="—"))
    display(pd.DataFrame(against["chain"]).set_index("model").style.format(tables.number, na_rep="—"))
