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
# # Memory and throughput: baseline vs gradient checkpointing vs Liger vs LoRA / QLoRA vs 8-bit optimizers
#
# How much memory and time does each training technique save on *this* model and *this* machine, and what fits on
# the GPU you can afford? Every variant below trains the same model on the same token batches in **its own fresh
# Python process** (so peak memory is clean), with warm-up steps excluded and several timed windows (medians and
# min–max). A memory model (`azllm/memory.py`) predicts the peak component by component, and the fit planner uses it
# to find the largest batch × sequence that fits a memory budget. Published claims to compare with: Liger Kernel
# +20% throughput and −60% memory (Llama-3-8B, 8×A100); LoRA/QLoRA savings of 35–70% (torchtune, Unsloth).
#
# **Measured memory** is what training adds on top of the process baseline. The baseline is taken inside each child
# after importing torch/transformers/peft/bitsandbytes and loading the token ids, and after `gc.collect()`: its
# resident set (`VmRSS`). The kernel's high-water mark is then reset (`/proc/self/clear_refs`) at the start of every
# timed window, and the window's peak is `VmHWM − baseline` (model build transients are not in it). On a GPU it is
# `torch.cuda.max_memory_allocated` above the allocated baseline (reserved is shown too).

# %% tags=["parameters"]
# What to change: params_file (a params YAML, relative to the repository root) and out_dir (where this
# page's numbers go); the rest of the notebook reads them.
params_file = "params/tiny.yaml"
out_dir = "reports/tiny"

# %%
import pandas as pd
from IPython.display import Markdown, display

from azllm import benchmark_tables, plots, recipes, report, tables
from azllm.recipes import benchmark, launch

cfg = recipes.setup(params_file)
B = cfg.benchmark
pd.set_option("display.max_columns", 40)
pd.set_option("display.width", 200)
print(
    f"preset {B.preset} {B.model or ''}, batch {B.batch_size} x seq {B.seq_len}, dtype {B.dtype}, "
    f"device {B.device}, {B.untimed_steps} untimed steps + {B.windows} windows x {B.steps} steps, "
    f"{B.rounds} round(s)"
)

# %% [markdown]
# ## Running the variants (one subprocess each)

# %%
res = benchmark.training_benchmark(cfg, out_dir)
print("device:", res["device"], "| tokens:", res["tokens"])
print("model:", res["config"])

# %% [markdown]
# ## The variants side by side
#
# Medians over the timed windows with their min–max; `speed ×` and `memory ×` are ratios against `baseline`
# (computed by `azllm.recipes.benchmark.variant_rows`, like every number of this page).
# `loss first/last` is the training loss at the first and the last step: every variant sees the same batches, so a
# variant that is fast but wrong shows here (LoRA trains far fewer weights, so its loss falls more slowly over
# these few steps: that is expected, not a bug). `load` is the machine's 1-minute load average when the variant
# finished: on a shared machine throughput spreads widely (memory does not). A variant that cannot run on this device
# is listed with the reason, an out-of-memory as "OOM at batch …"; its measurement columns show "—" (nothing was
# measured).

# %%
variants = benchmark.variant_rows(res)
display(benchmark_tables.variant_table(variants).style.format(tables.number, na_rep="—"))
notes = benchmark_tables.variant_notes(variants)
if notes:
    display(Markdown(notes))

# %%
fig = plots.variant_bars(variants)

# %% [markdown]
# ## Predicted vs measured memory
#
# The memory model's components (MiB) for each variant next to the measured peak. The model counts weights, gradients,
# optimizer states, the tensors autograd saves (op by op, see `azllm.memory.layer_activation_bytes`) and the loss head
# (logits upcast to fp32, the log-softmax and their gradients: 12 bytes per logit at the peak, which fused linear
# cross-entropy removes). What it does not count, and why the measured peak on CPU sits a few percent above it:
# the BLAS library's persistent packing/scratch buffers, sized by the largest matrix product (one
# `[1024×128]·[128×8000]` product and its backward alone leaves ~10 MB resident in a fresh process; the code-path
# warm-up before the baseline runs a minuscule model, so these are in the measurement), allocator slack and page
# granularity, small autograd bookkeeping (RoPE tables, masks), and on a GPU the CUDA context and cuBLAS workspace
# (outside `max_memory_allocated`, kept free by the planner's `reserve_gb`).

# %%
pred = benchmark.prediction_rows(res)
display(benchmark_tables.prediction_table(pred).style.format(tables.number, na_rep="—"))
print("\n".join(benchmark_tables.prediction_notes(benchmark.prediction_summary(pred))))
fig = plots.predicted_vs_measured(pred)

# %% [markdown]
# ## Out of memory as a result
#
# One variant runs under a memory cap (the child's address space is limited to its baseline plus the cap with
# `RLIMIT_AS` on CPU; `set_per_process_memory_fraction` on a GPU) at growing batch sizes until it runs out of memory.
# The planner's predicted largest batch for that budget is shown next to the measured one.

# %%
probe = res.get("oom_probe")
if probe:
    display(pd.DataFrame(probe["rows"]))
    print(
        f"{probe['variant']} under a {probe['cap_mb']} MiB cap: measured largest batch {probe['measured_max_batch']}, "
        f"planner {probe['planner_max_batch']}; first OOM: {probe['first_oom']}"
    )
else:
    print("no OOM probe in these params (benchmark.oom_probe.variant)")

# %% [markdown]
# ## Fit planner: the largest batch × sequence per memory budget
#
# From the memory model, for the models of `benchmark.fit` (the Llama-3.2-1B-shaped preset and any user configs),
# each variant and each budget (GB = 10⁹ bytes, with `reserve_gb` kept free for the CUDA context and fragmentation):
# the largest batch at each sequence length and the most tokens per step. 0 means even batch 1 does not fit.

# %%
fit = benchmark.fit_rows(cfg, device="cuda")
display(benchmark_tables.fit_table(fit).style.format(tables.number, na_rep="—"))

# %% [markdown]
# ## Cost per billion training tokens
#
# `benchmark.price_per_hour` for the instance in `benchmark.price_label`, divided by the measured throughput (median,
# and best/worst window). On CPU these numbers price *this* machine's throughput at that rate; the GPU script
# (`make bench-gpu`) gives the numbers for a real GPU.

# %%
cost = benchmark.cost_rows(cfg, res)
display(benchmark_tables.cost_table(cost).style.format(tables.number, na_rep="—"))
report.record(out_dir, "benchmark", benchmark.benchmark_record(res, variants, pred, cost, fit))
print("recorded to metrics.json: section 'benchmark'")

# %% [markdown]
# ## What a whole job costs
#
# `benchmark.job`: `tokens` to train on `instances` x `instance`, each device at the measured median tokens/s of a
# variant (or the planned `job.tokens_per_s`), scaled linearly to `gpus_per_instance` devices; on-demand vs managed
# spot prices (examples: set yours), plus storage of the kept checkpoints for the job's duration. Tokens/s measured
# on a CPU price *this* machine's speed at the instance's rate: the GPU run (`make bench-gpu`) gives the real one.

# %%
job = benchmark.job_cost_rows(cfg, res)
report.record(out_dir, "benchmark", {"job": B.job.model_dump(), "job_cost": job})
display(benchmark_tables.job_cost_table(job).style.format(tables.number, na_rep="—"))

# %% [markdown]
# ## The 1B setup as launched
# The job of `benchmark.plan` (by default `params/sagemaker.yaml`: the Llama-3.2-1B shape, 32k vocabulary, on one
# ml.p4d.24xlarge) priced at its *planned* tokens/s per GPU, exactly as `python -m azllm launch PARAMS --dry-run`
# prints it before a launch. Replace the planned tokens/s with the one `make bench-gpu` measures on the instance.

# %%
plan_cfg = recipes.load(B.plan) if B.plan else None
plan = launch.estimate(plan_cfg) if plan_cfg else {}
report.record(out_dir, "benchmark", {"plan": {"params": B.plan, **plan}})
print(
    launch.cost_lines(plan, spot=plan_cfg.launch.spot, max_run_hours=plan_cfg.launch.max_run_hours)
    if plan_cfg
    else "benchmark.plan: none"
)
