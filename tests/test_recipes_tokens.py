"""The token-file recipe (azllm.recipes.tokens): the run's tokenizer, train/val files and one file per eval set."""

from train_helpers import data  # noqa: F401  (module fixture: prepare_data on the fixture corpus)

from azllm.recipes.paths import Paths
from azllm.tokens import TokenFile, read_header


def test_prepare_data_gives_the_tokenizer_and_its_files(data):  # noqa: F811
    tok = data["tokenizer"]
    assert set(data) >= {"tokenizer", "train", "val", "dev", "encode"}
    assert data["train"].parent == Paths(data["P"]).tokens and set(data["dev"]) == {"flores"}
    for f in (data["train"], data["val"], data["dev"]["flores"]):
        assert read_header(f)["vocab_size"] == tok.vocab_size and len(TokenFile(f, tok)) > 0
    assert data["encode"]["train_tokens"] == read_header(data["train"])["n_tokens"]


def test_split_rows_and_summary(data):  # noqa: F811
    from azllm.recipes.tokens import split_rows, split_summary

    enc = {
        "train": data["train"],
        "val": data["val"],
        "skipped": 0,
        "dtype": "uint16",
        **{f"{s}_tokens": read_header(data[s])["n_tokens"] for s in ("train", "val")},
        "train_docs": 90,
        "val_docs": 10,
    }
    s = split_summary(enc)
    assert s["val_share_of_docs"] == 0.1
    assert s["val_share_of_tokens"] == enc["val_tokens"] / (enc["train_tokens"] + enc["val_tokens"])
    rows = split_rows(enc)
    assert [r["split"] for r in rows] == ["train", "val"]
    assert rows[0]["file_mb"] == data["train"].stat().st_size / 1e6


def test_encoder_record():
    """What metrics.json keeps of the encoder benchmark: its rows (variant and scale as values, not a key "c@10"),
    the ratios, the get_batch timing, the targets, the cores."""
    from azllm.recipes.tokens import encoder_record

    bench = {
        "variants": {"c@1": {"tokens_per_s": 3e6}},
        "rows": [{"variant": "c", "scale": 1, "tokens_per_s": 3e6}],
        "scale": 10,
        "ratios": {"c_over_limit_1x": 0.75},
        "targets": {"c_over_limit_at_least_0_85": False},
        "rounds": 1,
        "corpus": {"documents": 3},
        "get_batch": {"batch_tokens_per_s": 2e6, "batch_mtokens_per_s": 2.0},
        "load_avg_1min": [0.5, 0.7],
        "machine": {"cpu_count": 2},
    }
    rec = encoder_record(bench)
    assert rec["variants"] == bench["rows"] and "c@1" not in rec and rec["cpu_count"] == 2
    assert rec["ratios"] == bench["ratios"] and rec["get_batch"] == bench["get_batch"]
