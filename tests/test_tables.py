"""Tables of the reports (azllm.tables): built from real results of a tiny run, nothing computed anew; an eval set
of any name works (the adaptation table used to need one called "flores")."""

import warnings

import pytest
from train_helpers import data  # noqa: F401  (module fixture: tokenizer + token files of the fixture corpus)

from azllm import memory as mem
from azllm import tables


@pytest.fixture(scope="module")
def run(data):  # noqa: F811
    from azllm.recipes.train import train_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return train_model(data["P"], data, max_steps=4, output_dir=data["art"] / "tables-run", progress=False)


def test_run_summary_flattens_every_final_metric(run):
    row = tables.run_summary(run)
    assert row["main_steps"] == 4 and row["method"] == "full"
    assert (
        row["final_val_bpb"] == run["final"]["val"]["bpb"]
        and row["final_flores_loss"] == run["final"]["flores"]["loss"]
    )
    assert row["liger_applied"] == [] and row["tokens_per_s"] > 0


def test_compare_rows_and_data_summary(run, data):  # noqa: F811
    (row,) = tables.compare_rows([run])
    assert row["val_bpb"] == round(run["final"]["val"]["bpb"], 4) and row["trainable"] == row["total"]
    s = tables.data_summary(data, 3.0)
    assert s["tokenizer_vocab"] == data["tokenizer"].vocab_size and s["dev_sets"] == "flores"


def test_adapt_rows_use_the_runs_own_set_names(run):
    renamed = {
        **run,
        "way": "keep",
        "vocab_size": 512,
        "new_rows": "none",
        "az_set": "my_az",
        "en_set": "val",
        "curves": {
            **run["curves"],
            "eval": {"my_az": run["curves"]["eval"]["flores"], "val": run["curves"]["eval"]["val"]},
        },
        "final": {"my_az": run["final"]["flores"], "val": run["final"]["val"]},
    }
    (row,) = tables.adapt_rows([renamed], {"keep": 2.5})
    assert row["az bpb after"] == run["final"]["flores"]["bpb"] and row["en bpb after"] == run["final"]["val"]["bpb"]
    assert row["tokens/word"] == 2.5 and row["az bpb before"] == run["curves"]["eval"]["flores"][0]["bpb"]


def test_split_rows_and_summary(data):  # noqa: F811
    from azllm.tokens import read_header

    enc = {
        "train": data["train"],
        "val": data["val"],
        "skipped": 0,
        "dtype": "uint16",
        **{f"{s}_tokens": read_header(data[s])["n_tokens"] for s in ("train", "val")},
        "train_docs": 90,
        "val_docs": 10,
    }
    s = tables.split_summary(enc)
    assert s["val_share_of_docs"] == pytest.approx(0.1)
    assert [r["split"] for r in tables.split_rows(enc)] == ["train", "val"]


def test_records_turn_nan_into_none():
    import pandas as pd

    assert tables.records(pd.DataFrame([{"a": float("nan"), "b": 1.0}])) == [{"a": None, "b": 1.0}]


def test_summary_ratios_and_prediction_table():
    res = {
        "results": [
            {
                "variant": "baseline",
                "status": "ok",
                "tokens_per_s": [100, 110, 90],
                "step_s": [1, 1, 1],
                "peak_mb": [50, 52, 48],
                "predicted": mem.predict_memory(
                    dict(
                        hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, vocab_size=10
                    ),
                    "baseline",
                    1,
                    4,
                ),
            },
            {
                "variant": "ckpt",
                "status": "ok",
                "tokens_per_s": [80, 80, 80],
                "step_s": [1, 1, 1],
                "peak_mb": [25, 25, 25],
                "predicted": {
                    "weights": 0,
                    "grads": 0,
                    "optimizer": 0,
                    "activations": 0,
                    "logits": 0,
                    "total": 25 * 2**20,
                },
            },
            {
                "variant": "liger",
                "status": "unavailable",
                "reason": "not available on this device: no CUDA",
                "predicted": {"weights": 0, "grads": 0, "optimizer": 0, "activations": 0, "logits": 0, "total": 1},
            },
        ]
    }
    df = tables.summary_table(res)
    assert list(df.variant) == ["baseline", "ckpt", "liger"]  # never dropped
    assert df.loc[1, "speed ×"] == pytest.approx(0.8) and df.loc[1, "memory ×"] == pytest.approx(0.5)
    assert (df.loc[0, "tokens/s min"], df.loc[0, "tokens/s max"]) == (90, 110)
    assert df.loc[2, "note"].startswith("not available")
    pred = tables.prediction_table(res)
    assert pred.loc[1, "pred/meas"] == pytest.approx(1.0)


def test_sft_samples_put_the_base_answer_beside_the_trained_one():
    after = {
        "rows": [
            {"prompt": "Salam?", "answer": "Salam!", "reference": "Salam.", "chrf++": 40.0},
            {"prompt": "Nə?", "answer": "Bu.", "reference": "O.", "chrf++": 10.0},
        ]
    }
    before = {
        "rows": [
            {"prompt": "Salam?", "answer": "Hello!", "reference": "Salam.", "chrf++": 5.0},
            {"prompt": "Nə?", "answer": "What?", "reference": "O.", "chrf++": 0.0},
        ]
    }
    (row,) = tables.sft_samples(after, 1, before=before)
    assert row == {
        "instruction": "Salam?",
        "before SFT": "Hello!",
        "chrF++ before": 5.0,
        "answer": "Salam!",
        "chrF++": 40.0,
        "reference": "Salam.",
    }
    assert "before SFT" not in tables.sft_samples(after, 2)[1]
    before["rows"].reverse()
    with pytest.raises(ValueError, match="instructions differ"):
        tables.sft_samples(after, 2, before=before)


def test_pair_sentence_names_only_changes_beyond_the_noise():
    rows = [
        {
            "task": "sib200_az",
            "language": "az",
            "before": 0.2,
            "after": 0.4,
            "delta": 0.2,
            "delta_se": 0.05,
            "verdict": "gain",
        },
        {
            "task": "sib200_en",
            "language": "en",
            "before": 0.5,
            "after": 0.45,
            "delta": -0.05,
            "delta_se": 0.05,
            "verdict": "within noise",
        },
    ]
    s = tables.pair_sentence(rows)
    assert s == (
        "Azerbaijani beyond 1.96 standard errors: sib200_az 0.200 → 0.400 (+0.200 ± 0.050). "
        "No English measure moves beyond 1.96 standard errors."
    )
