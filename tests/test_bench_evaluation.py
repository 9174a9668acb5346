"""The scoring benchmark (azllm.bench.evaluation): fresh processes, round-robin, medians and the ratio."""

import pytest
from eval_helpers import REPO, eval_tokenizer_dir, hf_tok, tiny_folder  # noqa: F401


@pytest.mark.slow  # two fresh processes
def test_bench_eval_times_one_task_batched_and_not(tiny_folder, tmp_path, monkeypatch, capsys):
    from azllm.cli import main
    from conftest import FIXTURES

    monkeypatch.setenv("AZLLM_DATA_ROOT", str(FIXTURES))
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path))
    assert (
        main(
            [
                "bench",
                "eval",
                str(REPO / "params/tiny.yaml"),
                "--model",
                str(tiny_folder),
                "--rounds",
                "1",
                "--batch-sizes",
                "1",
                "8",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "sib200_az, median of 1 fresh processes: batch 1:" in out and "ratio" in out
    import json

    res = json.loads((tmp_path / "tiny" / "eval_benchmark.json").read_text())
    assert [r["batch_size"] for r in res["rows"]] == [1, 8] and all(r["items"] == 14 for r in res["rows"])
    assert res["ratio"] == pytest.approx(res["medians"]["8"] / res["medians"]["1"])
