"""Tables of the tokenizer study (notebook 01, :mod:`azllm.recipes.tokenizers`) as display tables: labels from
:data:`azllm.tables.LABELS`, columns chosen and ordered, nothing computed (the recipe gives every difference).

- :func:`tokenizer_tables`: every tokenizer on every eval set;
- :func:`recipe_table`: what each step of the corpus stage and the options bought, in turn;
- :func:`one_at_a_time_table`: each remaining choice alone against the run's tokenizer;
- :func:`best_sentence`: the selected tokenizer against its target, in words.
"""

from __future__ import annotations

from .tables import labelled

__all__ = ["tokenizer_tables", "recipe_table", "one_at_a_time_table", "best_sentence"]

TOKENIZER_COLUMNS = [
    "vocab_size",
    "fertility",
    "continued_words",
    "chars_per_token",
    "bytes_per_token",
    "parity",
    "fallback_rate",
    "vocab_used",
    "roundtrip",
    "morph_recall",
    "morph_precision",
]


def tokenizer_tables(rows: list[dict]) -> dict:
    """One DataFrame per eval set of :func:`azllm.metrics.evaluate`'s rows, tokenizers sorted by fertility."""
    import pandas as pd

    table = pd.DataFrame(rows).set_index(["eval_set", "tokenizer"]).sort_index()
    cols = [c for c in TOKENIZER_COLUMNS if c in table.columns]
    return {ev: table.loc[ev][cols].sort_values("fertility") for ev in dict.fromkeys(r["eval_set"] for r in rows)}


def recipe_table(rows: list[dict]):
    """:func:`azllm.recipes.tokenizers.recipe_table` by step: corpus MB, training seconds, then fertility and
    round trip per eval set."""
    import pandas as pd

    flat = []
    for r in rows:
        row = labelled(r, ("step", "corpus_mb", "train_s"))
        for ev in r["fertility"]:
            row.update({f"{ev} fertility": r["fertility"][ev], f"{ev} roundtrip": r["roundtrip"].get(ev)})
        flat.append(row)
    return pd.DataFrame(flat).set_index("step")


def best_sentence(best: dict) -> str:
    """The best tokenizer of :func:`azllm.recipes.tokenizers.best_summary` and its target, in words."""
    return (
        f"best {best['best_vocab_size']}-piece tokenizer: {best['best']}, fertility on {best['selected_on']} = "
        f"{best['best_fertility']:.3f} (target <= {best['fertility_target']:.2f}: "
        f"{'reached' if best['target_reached'] else 'not reached'})"
    )


def one_at_a_time_table(rows: list[dict]):
    """:func:`azllm.recipes.tokenizers.one_at_a_time_table` by change: tokens per word on each eval set and its
    change against the run's tokenizer, raw lines that do not round-trip, morphology recall and precision on the
    first set's words and on the lexicon, training seconds."""
    import pandas as pd

    flat = []
    for r in rows:
        row = {"change": r["change"]}
        for ev in r["fertility"]:
            row[f"{ev} tokens/word"] = r["fertility"][ev]
            row[f"{ev} Δ"] = r["fertility_delta"][ev]
        for ev, n in r["raw_roundtrip_failures"].items():
            row[f"{ev} raw lines lost"] = n
        row.update(labelled(r, ("morph_recall", "morph_precision", "lexicon_recall", "lexicon_precision", "train_s")))
        flat.append(row)
    return pd.DataFrame(flat).set_index("change")
