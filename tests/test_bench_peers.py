"""Token files three ways (azllm.bench.peers), through ``azllm bench peers``: the same tokens from azllm, nanoGPT's
``datasets.map`` and datatrove's ``DocumentTokenizer`` on the same generated text, and azllm's speed over each."""

import json

from train_helpers import tiny_params_file

from azllm.cli import main


def test_bench_peers_writes_the_same_tokens_three_ways(tmp_path, capsys):
    params = tiny_params_file(tmp_path / "p.yaml", "peers", {}, tokenizer={"vocab_size": 400, "model_type": "unigram"})
    out = tmp_path / "scale"
    assert main(["bench", "peers", str(params), "--size", "200K", "--rounds", "1", "--out", str(out)]) == 0
    record = json.loads((out / "peers.json").read_text())
    tokens = {peer: s["tokens"] for peer, s in record["peers"].items()}
    assert set(tokens) == {"azllm", "datasets", "datatrove"}
    assert len(set(tokens.values())) == 1 and tokens["azllm"] > 10_000, tokens
    assert set(record["ratios"]) == {"azllm_vs_datasets", "azllm_vs_datatrove"}
    assert "azllm_vs_datatrove" in capsys.readouterr().out
