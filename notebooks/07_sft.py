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
# # Instruction tuning: an adapted base turned into an Azerbaijani assistant
#
# The last stage of the guides our users follow: a chat dataset, the model's chat template, LoRA or QLoRA adapters
# trained with TRL's `SFTTrainer` on the assistant turns only, checked on a held-out split and exported as one
# folder (`azllm.recipes.sft`, every number under `sft` in `metrics.json`).
#
# With `sft.base: null` the base is notebook 05's adapted model: the way and method of the adaptation study with the
# lowest Azerbaijani bits per byte (the evaluation tasks do not choose it yet). In the default report that is the
# ~1M-parameter stand-in; `params/smollm2.yaml` runs 05–08 on SmolLM2-135M-Instruct.
# `params/sft_smollm2.yaml` runs the same page on SmolLM2-135M-Instruct (an English assistant with a real ChatML
# template), `params/gpu_sft.yaml` on Llama-3.2-1B on one GPU, and `params/sft_sagemaker.yaml` as a SageMaker job.

# %%
import pandas as pd
from IPython.display import display

from azllm import plots, recipes, report, tables
from azllm.recipes import controls, conversations, evaluate, judge, sft

cfg = recipes.setup(params_file)
S = cfg.sft

# %% [markdown]
# ## The base and its chat template
#
# A base with its own template keeps it (generation markers added where TRL or azllm knows how); a base without one
# gets azllm's template (`<|role|>content<|end|>` per turn), whose four role tokens are new special tokens with new
# embedding rows, trained like the rows of a vocabulary change.

# %%
base, note = sft.base_folder(cfg)
tok, template = sft.sft_tokenizer(cfg, base)
report.record(out_dir, "sft", {"base": note, "template": {k: v for k, v in template.items()}})
print(f"base: {base} ({note['how']}{', ' + note['way'] + ' / ' + note['method'] if 'way' in note else ''})")
if "runs" in note:
    print("Azerbaijani bits per byte of notebook 05's runs:", {k: round(v, 4) for k, v in note["runs"].items()})
print(
    f"template: {template['template']}; end of turn {template['end_of_turn']!r}; new tokens: "
    f"{len(template['added_tokens'])}"
)
print(
    tok.apply_chat_template(
        [{"role": "user", "content": "Salam!"}, {"role": "assistant", "content": "Salam, buyurun."}], tokenize=False
    )
)

# %% [markdown]
# ## Data
#
# Every source read as conversations (messages, prompt/completion or Alpaca-style records), normalized, empty turns
# and placeholder inputs (`sft.placeholders`, e.g. the translation artefact `"Yox"`) removed, exact and
# near-duplicate prompts dropped, a fixed held-out split drawn, training conversations overlapping it or the
# evaluation texts dropped, and the token-length policy applied. Every count is on the page.

# %%
data = conversations.sft_data(cfg, tok)
rows = conversations.data_rows(data["counts"])
report.record(out_dir, "sft", {"data": rows, "counts": data["counts"], "notes": data["notes"]})
for n in data["notes"]:
    print(n)
c = data["counts"]
print(
    f"held out: {c['held_out']} conversations: {c['held_out_drawn']} of {S.holdout_source} "
    f"({c['held_out_origin']} text), {c['eval_sources']} of sft.eval_sources"
)
with pd.option_context("display.max_colwidth", None):
    display(pd.DataFrame(rows).set_index("step"))

# %% [markdown]
# ## The main run
#
# `sft.method` with assistant-only loss, evaluated on the held-out split before the first step and every
# `sft.eval_steps`; the checkpoint with the lowest held-out loss is the model kept. The loss share is the share of
# training tokens that carry loss (the assistant turns and their end-of-turn token).

# %%
main = sft.sft_run(cfg, base=base, tokenizer=tok, template=template, data=data)
ans = sft.answers(cfg, main, base=base, tokenizer=tok, template=template, data=data)
main_rec = sft.main_record(main, ans)
report.record(out_dir, "sft", main_rec)
tables.sft_table([main_rec["main"]]).T.rename(columns={0: "main run"})

# %% [markdown]
# ## Full, LoRA and QLoRA, packing on and off
#
# Each variant from the same base and data for `sft.compare_steps` steps, in its own process (its peak memory is its
# own: peak RSS on CPU). Tokens/s counts real tokens, padding left out. Packing is `bfd`: padding-free rows whose
# position ids restart per conversation, so on SDPA a packed conversation does not see the others (tested).

# %%
variants = sft.compare_variants(cfg, base)
var_rows = [sft.run_row(v) for v in variants]
report.record(out_dir, "sft", {"variants": var_rows})
tables.sft_table(var_rows).set_index(["method", "packing"]) if var_rows else print(
    "No variants were compared in this run (sft.compare lists none): the main run above is the only one."
)

# %%
fig = plots.sft_curves([main, *variants])

# %% [markdown]
# ## Sample answers, before and after
#
# Greedy answers to held-out instructions, made with the chat template, next to the references: the SFT base's own
# answer before any step, then the trained model's. chrF++ (sacrebleu, character 6-grams and word bigrams) of all
# held-out answers, before -> after; the standard error of the change is that of the paired per-answer chrF++
# differences, and a change is a gain (▲) or loss (▼) only beyond 1.96 of them.

# %%
ans_before = judge.base_answers(cfg, base=base, tokenizer=tok, template=template, data=data)
chrf = judge.chrf_change(cfg, ans_before, ans)
samples = sft.samples(ans, S.samples_shown, before=ans_before)
report.record(out_dir, "sft", {"samples": samples, "chrf_before_after": chrf})
print(
    f"chrF++ on {chrf['n']} held-out answers: {chrf['before']:.1f} before -> {chrf['after']:.1f} after SFT "
    f"({chrf['delta']:+.1f} ± {chrf['delta_se']:.1f}: {chrf['verdict']}); answers that stopped at the end of "
    f"turn: {ans_before['stopped_share']:.0%} -> {ans['stopped_share']:.0%}"
)
with pd.option_context("display.max_colwidth", None):
    display(tables.samples_table(samples))

# %% [markdown]
# ## Which stage helps
#
# The same held-out answers from every stage, with the same decoding (greedy, `sft.max_new_tokens`, repetition
# penalty `sft.repetition_penalty` on the answer's own tokens): the original base (`adapt.base`), the adapted base,
# the adapted base after SFT, and, with `sft.controls`, the same SFT recipe on the original base. chrF++ is paired
# per answer against the first row; MDE is the smallest change this many answers can detect (80% power). A loop is
# an answer in which one word 3-gram occurs three times or more.

# %%
stages = (
    controls.control_answers(cfg, adapted=ans_before, adapted_sft=ans)
    if S.controls
    else {
        "adapted": ans_before,
        "adapted + SFT": ans,
    }
)
stage_rows = controls.stage_rows(cfg, stages)
report.record(out_dir, "sft", {"stages": stage_rows, "decoding": judge.decoding(cfg)})
if not S.controls:
    print("sft.controls is off: the original base and SFT without adaptation are not compared in this run.")
tables.stage_table(stage_rows).style.format(tables.number, na_rep="—")

# %% [markdown]
# ## The export
#
# The main run merged into one standalone folder: safetensors weights, the tokenizer and its chat template
# (`chat_template.jinja`), a generation config that stops at the end of turn. Plain `transformers` loads it, and
# `apply_chat_template` on it gives the training format (tested, with the same generated tokens as in memory).

# %%
if S.export:
    folder = sft.export_sft(cfg, main, base=base, tokenizer=tok, template=template)
    report.record_artifact(out_dir, "sft_export", folder)
    print("exported:", folder, sorted(p.name for p in folder.iterdir()))

# %% [markdown]
# ## Tasks before and after
#
# The forgetting check the guides ask for: the evaluation recipe's Azerbaijani and English tasks (notebook 06's,
# `evaluate.tasks` and the probe) on the SFT base and on the exported SFT model, each with its standard error;
# a change is a gain (▲) or loss (▼) only beyond 1.96 paired standard errors. The tasks are scored with plain
# prompts (no chat template), as for the base.

# %%
if S.export:
    before, after = evaluate.score_pair(cfg, base, folder)
    pair = evaluate.pair_rows(cfg, before, after)
    report.record(out_dir, "sft", {"tasks_before_after": pair})
    print(tables.pair_sentence([*pair, chrf], cfg.evaluate.z))
    display(pd.DataFrame(pair).set_index("task").style.format(tables.number, na_rep="—"))
else:
    print("sft.export is off: the SFT model is not scored on the tasks")
