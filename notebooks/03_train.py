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
# # Training a Llama for Azerbaijani
#
# This report trains a Llama-architecture model with the run's tokenizer on the run's corpus (`azllm.recipes.train`,
# the Hugging Face Trainer), then fine-tunes it with the methods the params ask for (full, LoRA, QLoRA) and
# compares them. Every number on this page is in `metrics.json` under `train`.
#
# **Bits per byte** (bpb) is the evaluation metric that compares across tokenizers: the summed next-token
# negative log-likelihood (in bits) divided by the UTF-8 bytes of the text the predicted tokens decode to (an EOS
# counts as the one newline byte that separated documents). Perplexity is per token of *this* tokenizer.

# %%
import pandas as pd
from IPython.display import display

from azllm import plots, recipes, report, tables
from azllm import train as azt
from azllm.model import liger_available
from azllm.recipes import train
from azllm.recipes.benchmark import compare_methods, compare_rows
from azllm.recipes.tokens import prepare_data

cfg = recipes.setup(params_file)

# %% [markdown]
# ## Data: tokenizer and token files

# %%
data = prepare_data(cfg)
tok = data["tokenizer"]
bpt_train = azt.bytes_per_token(data["train"], tok)
summary = train.data_summary(data, bpt_train)
report.record(out_dir, "train", {k: v for k, v in summary.items() if k != "dev_sets"})
report.record_artifact(out_dir, "train_tokens", data["train"])
pd.DataFrame([summary])

# %% [markdown]
# ## Model and kernels
#
# Liger's fused Triton kernels need a CUDA GPU. On a CPU-only machine the run says so and trains without them;
# the flags asked for and what was applied are recorded.

# %%
ok, why = liger_available()
print(f"Liger kernels requested: {cfg.model.liger.kernels() or 'none'}; available: {ok} ({why})")

# %% [markdown]
# ## Main run
#
# `train.method` from the params, from scratch (or from `model.base` with the tokenizer swapped in). It resumes
# from its last complete checkpoint if it was interrupted, and is not re-trained when it already finished.

# %%
main = train.train_model(cfg, data)
row = train.run_summary(main)
report.record(out_dir, "train", row)
report.record_artifact(out_dir, "model", main["final_dir"])
tables.run_table(row)

# %% [markdown]
# ### Loss and bits per byte
#
# Training loss (logged every `logging_steps`, averaged) and the evaluations on `val` and the dev sets. The
# training bpb uses the average bytes per token of the training split (the evaluations' bpb is exact).

# %%
fig = plots.training_curves(train.curves(main, bpt_train))
pd.DataFrame(main["final"]).T.round(4)

# %% [markdown]
# ## Full fine-tuning vs LoRA vs QLoRA
#
# Each method continues from the main run's model for the same number of steps, each in its own process so that
# its peak memory is its own (peak RSS on CPU; CUDA max allocated/reserved on a GPU). QLoRA quantizes the frozen
# base to 4-bit NF4 with double quantization (bitsandbytes) and trains LoRA adapters on all linear layers.

# %%
T = cfg.train
runs = compare_methods(cfg, T.compare, base=main["final_dir"], max_steps=T.compare_steps, lr=T.compare_lr)
rows = compare_rows(runs)
report.record(out_dir, "train", {"compare": rows, "compare_steps": T.compare_steps})
if rows:
    fig = plots.method_bars(rows)
    display(pd.DataFrame(rows).set_index("method"))
else:
    print("No comparison runs in this run (train.compare lists none).")

# %% [markdown]
# ## Generations
#
# Greedy and sampled (temperature and top-k from the params, seeded) continuations of Azerbaijani prompts by the
# main model. `⏎` marks an end of document.

# %%
G = T.generate
gens = azt.generate(
    azt.load_trained(main["final_dir"]),
    tok,
    G.prompts,
    max_new_tokens=G.max_new_tokens,
    temperature=G.temperature,
    top_k=G.top_k,
    seed=cfg.seed,
)
report.record(out_dir, "train", {"generations": gens})
with pd.option_context("display.max_colwidth", None):
    display(pd.DataFrame(gens))
