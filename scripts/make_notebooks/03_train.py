"""Generate notebooks/03_train.ipynb (no outputs): `python scripts/make_notebooks/03_train.py`."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = []
md = lambda s: cells.append(new_markdown_cell(s.strip()))  # noqa: E731
code = lambda s, **kw: cells.append(new_code_cell(s.strip(), **kw))  # noqa: E731

code('params_file = "params/tiny.yaml"\nout_dir = "reports/tiny"', metadata={"tags": ["parameters"]})
md("""
# Training a Llama for Azerbaijani

This report trains a Llama-architecture model with the run's tokenizer on the run's corpus (`azllm.train`, the
Hugging Face Trainer), then fine-tunes it with the methods the params ask for (full, LoRA, QLoRA) and compares
them. Every number on this page is in `metrics.json` under `train`.

**Bits per byte** (bpb) is the evaluation metric that compares across tokenizers: the summed next-token
negative log-likelihood (in bits) divided by the UTF-8 bytes of the text the predicted tokens decode to (an EOS
counts as the one newline byte that separated documents). Perplexity is per token of *this* tokenizer.
""")
code("""
import warnings
import pandas as pd
from azllm import plots
from azllm.config import load_params
from azllm.report import record, record_artifact
from azllm import train as T
from azllm.model import liger_available

warnings.filterwarnings("ignore", category=FutureWarning)
P = load_params(params_file)
TP = P["train"]
""")
md("## Data: tokenizer and token files")
code("""
data = T.prepare_data(P)
tok = data["tokenizer"]
bpt_train = T.bytes_per_token(data["train"], tok)
enc = data["encode"]
summary = {"tokenizer_vocab": tok.vocab_size, "train_tokens": enc["train_tokens"], "val_tokens": enc["val_tokens"],
           "train_bytes_per_token": round(bpt_train, 3), "dev_sets": ", ".join(data["dev"]) or "none"}
record(out_dir, "train", {k: v for k, v in summary.items() if k != "dev_sets"})
record_artifact(out_dir, "train_tokens", data["train"])
pd.DataFrame([summary])
""")
md("""
## Model and kernels

Liger's fused Triton kernels need a CUDA GPU. On a CPU-only machine the run says so and trains without them;
the flags asked for and what was applied are recorded.
""")
code("""
ok, why = liger_available()
asked = [k for k, v in P["model"]["liger"].items() if v]
print(f"Liger kernels requested: {asked or 'none'}; available: {ok} ({why})")
""")
md("""
## Main run

`train.method` from the params, from scratch (or from `model.base` with the tokenizer swapped in). It resumes
from its last complete checkpoint if it was interrupted, and is not re-trained when it already finished.
""")
code("""
main = T.run_training(P, tokenizer=tok, token_files={"train": data["train"], "val": data["val"]},
                      dev_files=data["dev"])
row = T.run_summary(main)
record(out_dir, "train", row)
record_artifact(out_dir, "model", main["final_dir"])
pd.DataFrame([{k: v for k, v in row.items() if not k.startswith("final_")}]).T.rename(columns={0: "main run"})
""")
md("""
### Loss and bits per byte

Training loss (logged every `logging_steps`, averaged) and the evaluations on `val` and the dev sets. The
training bpb uses the average bytes per token of the training split (the evaluations' bpb is exact).
""")
code("""
fig = plots.training_curves(main["curves"], bpt_train)
pd.DataFrame({name: f for name, f in main["final"].items()}).T.round(4)
""")
md("""
## Full fine-tuning vs LoRA vs QLoRA

Each method continues from the main run's model for the same number of steps, each in its own process so that
its peak memory is its own (peak RSS on CPU; CUDA max allocated/reserved on a GPU). QLoRA quantizes the frozen
base to 4-bit NF4 with double quantization (bitsandbytes) and trains LoRA adapters on all linear layers.
""")
code("""
methods = TP["compare"]
if methods:
    runs = T.compare_methods(params_file, methods, base=main["final_dir"], max_steps=TP["compare_steps"],
                             lr=TP["compare_lr"])
    rows = T.compare_rows(runs)
    record(out_dir, "train", {"compare": rows, "compare_steps": TP["compare_steps"]})
    fig = plots.method_bars(rows)
    cmp = pd.DataFrame(rows).set_index("method")
    display(cmp)
else:
    print("train.compare is empty: no comparison runs")
""")
md("""
## Generations

Greedy and sampled (temperature and top-k from the params, seeded) continuations of Azerbaijani prompts by the
main model. `⏎` marks an end of document.
""")
code("""
G = TP["generate"]
model = T.load_trained(main["final_dir"])
gens = T.generate(model, tok, G["prompts"], max_new_tokens=G["max_new_tokens"], temperature=G["temperature"],
                  top_k=G["top_k"], seed=P["seed"])
record(out_dir, "train", {"generations": gens})
with pd.option_context("display.max_colwidth", None):
    display(pd.DataFrame(gens))
""")

nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "azllm", "display_name": "Python (azllm)",
                                                        "language": "python"},
                                         "language_info": {"name": "python"}})
for i, c in enumerate(nb.cells):  # stable ids: regenerating gives the same file
    c["id"] = f"cell-{i:02d}"
out = Path(__file__).resolve().parents[2] / "notebooks" / "03_train.ipynb"
nbformat.write(nb, str(out))
print(out)
