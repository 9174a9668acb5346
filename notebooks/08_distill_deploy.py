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
# # Distil and deploy: a small Azerbaijani model for a phone, checked token for token
#
# The advice that closes the study: train a mid-size model, then distil it into a small one that runs on a phone.
# The **teacher** is the study's best Azerbaijani model (`distill.teacher`: the adaptation run with the lowest
# Azerbaijani bits per byte, or the instruction-tuned model of notebook 07). The **student** keeps every
# `distill.keep_every`-th layer of the teacher with its embeddings and tokenizer (Minitron-style depth pruning) and
# learns from the teacher's next-token distribution: `(1 - w) CE + w T² KL(teacher || student)`, computed a chunk of
# positions at a time (`azllm.distill`). The **baseline** is the same student on cross-entropy alone, at equal
# tokens and steps. Then each model becomes GGUF files for llama.cpp (F16, Q8_0, Q4_K_M, converted by llama.cpp's own
# `convert_hf_to_gguf.py` and quantize API), and every file is checked: the tokenizer on every line of the dev
# sets, the logits against PyTorch, the quality of each quantization against F16, the speed on 2 threads.
#
# In the default report the teacher is the ~1M-parameter stand-in (the page shows the method; its numbers are small);
# `params/smollm2.yaml` distils SmolLM2-135M adapted to Azerbaijani.

# %%
import pandas as pd
from IPython.display import Markdown, display

from azllm import plots, recipes, report, tables
from azllm.recipes import deploy, distill

cfg = recipes.setup(params_file)

# %% [markdown]
# ## Teacher and students
#
# Bits per byte on the Azerbaijani dev set and on held-out English (comparable across models and tokenizers), with
# the parameters and the weights on disk; the students trained for the same steps on the same token files.

# %%
study = distill.run_distill(cfg)
rows = distill.student_rows(cfg, study)
verdict = distill.bpb_verdict(study, cfg)
report.record(out_dir, "distill", {"teacher": study["teacher"], "models": rows, "bpb": verdict})
for name, folder in study["exports"].items():
    report.record_artifact(out_dir, f"distill_export/{name}", folder)
display(pd.DataFrame(rows).set_index("model").style.format(tables.number, na_rep="—"))
display(Markdown(tables.distill_sentence(verdict)))

# %% [markdown]
# ## The students learning
#
# Bits per byte of the Azerbaijani dev set at every evaluation (step 0: the pruned student before training), the
# teacher as a line.

# %%
fig = plots.distill_curves(study, distill.az_set_name(cfg))

# %% [markdown]
# ## The tasks of notebook 06: the KD student against the cross-entropy student, and against the teacher
#
# Each difference with its paired standard error; ▲ / ▼ beyond 1.96 standard errors, · within the noise. A score at
# chance (the `chance` column) answers nothing.

# %%
report.record(
    out_dir, "distill", {"kd_vs_ce": study.get("kd_vs_ce", []), "kd_vs_teacher": study.get("kd_vs_teacher", [])}
)
display(pd.DataFrame(study.get("kd_vs_ce", [])).style.format(tables.number, na_rep="—"))
display(pd.DataFrame(study.get("kd_vs_teacher", [])).style.format(tables.number, na_rep="—"))

# %% [markdown]
# ## GGUF files and their checks
#
# `deploy.models` as F16, Q8_0 and Q4_K_M files. **Tokenizer parity**: llama.cpp's token ids against the Hugging
# Face tokenizer's on every line of the dev sets, apart for the lines that hold a token the base tokenizer lacked
# (the extension's new tokens) and for those that hold none; any mismatch is listed below the table.

# %%
records = deploy.run_deploy(cfg, study)
report.record(
    out_dir,
    "deploy",
    {"parity": deploy.parity_rows(records), "files": deploy.quant_rows(records), "summary": deploy.summary(records)},
)
for name, rec in records.items():
    for q, f in rec["files"].items():
        report.record_artifact(out_dir, f"gguf/{name}/{q}", f["path"])
display(pd.DataFrame(deploy.parity_rows(records)).style.format(tables.number, na_rep="—"))
bad = deploy.mismatches(records)
display(pd.DataFrame(bad)) if bad else print(
    "every line tokenized the same by llama.cpp and the Hugging Face tokenizer"
)

# %% [markdown]
# ## Quality and size of each file
#
# Against the F16 file on Azerbaijani text, in llama.cpp's own terms: mean KL divergence, perplexity ratio and the
# share of positions with the same top-1 token (each with its standard error); the F16 row: the largest logit
# difference and top-1 agreement against the PyTorch model. **Bits per weight** are the file's real ones: a model
# 576 wide (SmolLM2) cannot use the K-quants' blocks of 256 in most tensors, so "Q4_K_M" falls back to Q5_0 / Q8_0
# there (the `tensor_types` column). llama.cpp's LLaMA-3-8B table for reference: Q8_0 KLD 0.0014 (same top-1
# 97.7%), Q4_K_M 0.031 (91.9%).

# %%
display(pd.DataFrame(deploy.quant_rows(records)).style.format(tables.number, na_rep="—"))
points = deploy.size_quality_points(cfg, rows, records, distill.deployed_labels(cfg))
report.record(out_dir, "deploy", {"size_quality": points})
fig = plots.size_vs_quality(points)

# %% [markdown]
# ## Speed on 2 threads (the phone stand-in)
#
# Prompt (prefill) and generation tokens/s and peak memory of each file with llama.cpp and of the model with
# transformers on the same CPU, each in a fresh process.

# %%
speed = [{"model": n, **r} for n, rec in records.items() for r in rec["speed"]]
report.record(out_dir, "deploy", {"speed": speed})
display(pd.DataFrame(speed).style.format(tables.number, na_rep="—")) if speed else print(
    "Speed was not measured in this run (deploy.speed is off)."
)

# %% [markdown]
# ## Answers of the smallest file beside the PyTorch model's
#
# Greedy, the same prompts: held-out instructions for a chat model, `train.generate.prompts` for a language model.

# %%
answers = [{"model": n, **a} for n, rec in records.items() for a in rec["answers"]]
report.record(out_dir, "deploy", {"answers": answers})
display(pd.DataFrame(answers)) if answers else print(
    "No answers were generated in this run (deploy.generate_lines is 0)."
)
