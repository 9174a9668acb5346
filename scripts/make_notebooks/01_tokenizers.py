"""Writes notebooks/01_tokenizers.ipynb. Run: python scripts/make_notebooks/01_tokenizers.py"""

from pathlib import Path

from _nb import PARAMS_CELL, write

ROOT = Path(__file__).resolve().parents[2]

cells = [
    ("md", """
# Tokenizers for Azerbaijani: how many tokens per word?

Every extra token per word costs training compute, context length and money. This report trains SentencePiece
tokenizers on the run's Azerbaijani corpus (a sweep over vocabulary size, unigram vs BPE, with and without an
affix-aware pre-split), measures them and the baseline tokenizers of well-known models on held-out sets, and picks
the best one at the run's vocabulary size.

Definitions of every metric: `azllm/metrics.py`; normalization and the definition of "word": `azllm/text.py`;
the suffix inventory: `azllm/morph.py`.
"""),
    ("params", PARAMS_CELL),
    ("code", """
import pandas as pd
from IPython.display import display, Markdown
from azllm import config, data, metrics, plots, report, tokenizer

P = config.load_params(params_file)
root = config.data_root(P)
art = config.artifacts_dir(P)
train_src = data.resolve_source(tokenizer.training_source(P), root)
print("data root:", root or "none (hub sources)", "| set AZLLM_DATA_ROOT or data.root to point elsewhere")
print("training corpus:", train_src.describe())
report.record_inputs(out_dir, "train", train_src)
"""),
    ("md", "## The corpus and the held-out sets\nDocuments are normalized (`azllm.text.normalize`) before training and before measuring."),
    ("code", """
docs = list(data.iter_documents(train_src))
evals, parallel, resolved = data.load_eval_sets(P, root)
for name, r in resolved.items():
    report.record_inputs(out_dir, name, r)
corpus = {"documents": len(docs), "words": sum(len(d.split()) for d in docs),
          "characters": sum(len(d) for d in docs), "bytes": sum(len(d.encode()) for d in docs)}
report.record(out_dir, "tokenizers", {"corpus": corpus,
              "eval_sets": {k: {"lines": len(v), "words": sum(len(x.split()) for x in v)} for k, v in evals.items()}})
display(pd.DataFrame([corpus], index=["training corpus"]))
display(pd.DataFrame({k: {"lines": len(v), "words": sum(len(x.split()) for x in v)} for k, v in evals.items()}).T)
"""),
    ("md", "## Training the sweep\nEvery combination of `tokenizer.sweep` in the params; unchanged variants are reused from the artifacts folder."),
    ("code", """
trained_paths, skipped = tokenizer.train_sweep(docs, art / "tokenizers", tokenizer.sweep_options(P))
report.record(out_dir, "tokenizers", {"skipped": skipped})
for name, why in skipped.items():
    print(f"not trained: {name}: {why}")
main_path = tokenizer.main_tokenizer(P, docs=docs)
report.record_artifact(out_dir, "tokenizer", main_path)
for name, path in trained_paths.items():
    report.record_artifact(out_dir, f"tokenizers/{name}", path)
trained = {name: tokenizer.load_tokenizer(path, name=name) for name, path in trained_paths.items()}
baselines = tokenizer.load_baselines(P, root)
print(f"{len(trained)} trained, {len(baselines)} baselines")
"""),
    ("md", "## Every tokenizer on every held-out set"),
    ("code", """
rows = metrics.evaluate({**trained, **baselines}, evals, parallel)
report.record(out_dir, "tokenizers", {"table": rows})
table = pd.DataFrame(rows).set_index(["eval_set", "tokenizer"]).sort_index()
cols = ["vocab_size", "fertility", "continued_words", "chars_per_token", "bytes_per_token", "parity", "fallback_rate",
        "vocab_used", "roundtrip", "morph_recall", "morph_precision"]
for ev in evals:
    display(Markdown(f"**{ev}** (sorted by fertility)"))
    display(table.loc[ev][[c for c in cols if c in table.columns]].sort_values("fertility").style.format(precision=3))
"""),
    ("md", """
## Fertility against vocabulary size
Solid lines: plain SentencePiece; dashed: with the affix-aware pre-split, where no piece may cross a suffix
boundary that the inventory predicts.
"""),
    ("code", """
first_eval = next(iter(evals))
fig = plots.fertility_vs_vocab(rows, first_eval, trained=set(trained))
"""),
    ("md", "## Our best tokenizer at the selected vocabulary size against every baseline"),
    ("code", """
vs = P["tokenizer"]["sweep"]["select_vocab_size"] or P["tokenizer"]["vocab_size"]
best = metrics.best_variant(rows, first_eval, vocab_size=vs, among=set(trained))
fig = plots.best_vs_baselines(rows, first_eval, [best["tokenizer"], *baselines], highlight=best["tokenizer"], target=1.40)
summary = {"best": best["tokenizer"], "best_vocab_size": vs, "best_fertility": best["fertility"],
           "selected_on": first_eval}
for ev in evals:
    r = next(x for x in rows if x["tokenizer"] == best["tokenizer"] and x["eval_set"] == ev)
    summary[f"best_fertility_{ev}"] = r["fertility"]
print(f"best {vs}-piece tokenizer: {best['tokenizer']}, fertility on {first_eval} = {best['fertility']:.3f}"
      f" (target <= 1.40: {'reached' if best['fertility'] <= 1.40 else 'not reached'})")
"""),
    ("md", """
## Lossless round trip and the exported Hugging Face tokenizer
For the best tokenizer, on every dev line: `decode(encode(x)) == x` for the normalized `x`, and the exported folder
loaded with `transformers.AutoTokenizer` (offline) gives exactly the SentencePiece ids.
"""),
    ("code", """
checks = metrics.export_checks(trained[best["tokenizer"]], trained_paths[best["tokenizer"]],
                               {**evals, **{f"{k}.en": v[1] for k, v in parallel.items()}})
summary["checks"] = checks
report.record(out_dir, "tokenizers", summary)
display(pd.DataFrame(checks).T)
"""),
    ("md", "## How the tokenizers cut long words\nPieces separated by `·`; `_` marks a word start; the token count in brackets."),
    ("code", """
every = {**trained, **baselines}
shown = [n for n in (best["tokenizer"], best["tokenizer"] + "-affix", *baselines) if n in every]
seg = metrics.segmentations({n: every[n] for n in shown}, P["report"]["long_words"])
report.record(out_dir, "tokenizers", {"segmentations": seg})
with pd.option_context("display.max_colwidth", None):
    display(pd.DataFrame(seg))
"""),
    ("md", """
## What the affix-aware pre-split buys and costs
`morph_recall`: share of predicted suffix boundaries that are token boundaries; `morph_precision`: share of
word-internal token boundaries that are predicted suffix boundaries. The pre-split should raise both, at the cost of
more tokens per word.
"""),
    ("code", """
pairs = metrics.affix_comparison(rows, first_eval, trained)
report.record(out_dir, "tokenizers", {"affix_presplit": pairs})
display(pd.DataFrame(pairs).set_index("variant").style.format(precision=3))
"""),
]

if __name__ == "__main__":
    write(ROOT / "notebooks" / "01_tokenizers.ipynb", cells)
