"""The token-file recipe (azllm.recipes.tokens): the run's tokenizer, train/val files and one file per eval set."""

from pathlib import Path

import pytest
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


def test_the_data_stages_take_their_inputs_by_marker_and_build_them_only_through_stages(data, monkeypatch):  # noqa: F811
    """prepare_data found the corpus stage's mix and the run's tokenizer by their markers (the fixture built them
    through stages.require); with both marked, neither stage runs again, and a changed run rebuilds through the
    stages' builders, not through a direct call."""
    from azllm.recipes import corpus, stages, tokenizers
    from azllm.recipes.tokens import prepare_data

    P, tok = data["P"], data["tokenizer"]
    mix, made = stages.finished(P, "corpus"), stages.finished(P, "tokenizers")
    assert Path(mix["artifact"]).name.startswith("mix-") and mix["key"]
    assert made["artifact"] == str(Path(tok.path).resolve()) and made["complete"] == "tokenizer.json"

    def ran(*a, **k):
        raise AssertionError("a data stage ran although its output was marked")

    monkeypatch.setattr(corpus, "run_corpus", ran)
    monkeypatch.setattr(tokenizers, "main_tokenizer", ran)
    again = prepare_data(P, progress=False)
    assert again["tokenizer"].fingerprint == tok.fingerprint and again["train"] == data["train"]
    assert corpus.clean_documents(P) and corpus.corpus_source(P).files == [Path(mix["artifact"])]
    with pytest.raises(AssertionError, match="data stage ran"):  # other params: the marker is not theirs
        tokenizers.run_tokenizer(P.model_copy(update={"seed": 99}))


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


def test_prepare_marks_a_folder_that_opens_anywhere_without_the_corpus(data, tmp_path, monkeypatch):  # noqa: F811
    """``azllm prepare``'s marker: the tokenizer and the dev files travel with the token files, and the folder opens
    under another data root (a SageMaker channel, another node) from its copy, with the same files and tokenizer;
    a config that makes other data does not open it."""
    import shutil

    from azllm.config import deep_update, load_params
    from azllm.recipes.tokens import PREPARE_LOG, PREPARED, open_prepared, prepare, prepare_once

    P = data["P"]
    marker = prepare(P, progress=False)
    assert marker == Paths(P).tokens / PREPARED
    folder = tmp_path / "channel"
    shutil.copytree(marker.parent, folder)
    moved = load_params(None, overrides=deep_update(P.to_dict(), {"data": {"root": str(tmp_path / "nothing")}}))
    opened = open_prepared(moved, folder)
    assert opened["tokenizer"].fingerprint == data["tokenizer"].fingerprint
    assert opened["train"].read_bytes() == data["train"].read_bytes() and opened["train"].parent == folder
    assert opened["dev"]["flores"].read_bytes() == data["dev"]["flores"].read_bytes()
    assert opened["encode"]["train_tokens"] == data["encode"]["train_tokens"]
    other = load_params(None, overrides=deep_update(P.to_dict(), {"tokens": {"val_fraction": 0.2}}))
    assert open_prepared(other, folder) is None
    # a process of a launch finds it prepared: it opens the folder and prepares nothing
    lines = (Path(folder) / PREPARE_LOG).read_text().splitlines()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    again = prepare_once(load_params(None, overrides=deep_update(P.to_dict(), {"tokens": {"dir": str(folder)}})))
    assert again["train"] == folder / "train.bin"
    assert (folder / PREPARE_LOG).read_text().splitlines() == lines


def test_a_waiting_rank_stops_at_once_when_rank_0_fails_and_past_its_timeout(tmp_path, monkeypatch):
    """Rank 1 of a launch waits for rank 0's marker: rank 0's failure stops it at once with rank 0's error; with no
    marker and no failure it stops after ``tokens.prepare_timeout_s`` and says what to do."""
    import time

    import pytest

    from azllm.config import load_params
    from azllm.recipes.tokens import FAILED, data_key, prepare_once
    from azllm.tokens import TokenFileError
    from azllm.utils import atomic_write_json

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    cfg = load_params(None, overrides={"tokens": {"dir": str(tmp_path), "prepare_timeout_s": 0.5}})
    t0 = time.monotonic()
    with pytest.raises(TokenFileError, match=r"waited 0 s .*azllm prepare PARAMS"):
        prepare_once(cfg, poll_s=0.1)
    assert time.monotonic() - t0 < 5
    atomic_write_json(tmp_path / FAILED, {"key": data_key(cfg), "error": "DataError: no documents"})
    cfg = load_params(None, overrides={"tokens": {"dir": str(tmp_path), "prepare_timeout_s": 3600}})
    with pytest.raises(TokenFileError, match="rank 0 failed to prepare the data .*: DataError: no documents"):
        prepare_once(cfg, poll_s=0.1)
