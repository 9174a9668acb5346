"""The scale benchmark's recipe (azllm.recipes.scale), through the command a user types: every stage at two
small sizes of generated text, in fresh processes, with the growth fit and nothing lost in the mix."""

import json

import pytest
from train_helpers import tiny_params_file

from azllm.cli import main
from azllm.recipes.scale import STAGES, parse_size, scale_rows


@pytest.mark.slow  # every stage in a fresh process at two sizes (~30 s on 2 cores)
def test_bench_scale_command_measures_every_stage_at_every_size(tmp_path, capsys):
    params = tiny_params_file(tmp_path / "p.yaml", "scale", {}, tokenizer={"vocab_size": 400, "model_type": "unigram"})
    out = tmp_path / "scale"
    assert main(["bench", "scale", str(params), "--sizes", "200K,400K", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    record = json.loads((out / "scale.json").read_text())
    assert [r["size"] for r in record["sizes"]] == ["200K", "400K"]
    for r in record["sizes"]:
        for stage in STAGES:
            assert r[stage]["seconds"] > 0 and r[stage]["peak_rss_mb"] > 50, (r["size"], stage)
        assert r["mix"]["kept_share"] >= 0.995  # distinct text: the mix keeps it
        assert 0.5 < r["corpus"]["kept_share"] <= 1
        assert r["tokens"]["docs"] > 0 and r["tokenizer"]["lines"] >= r["sentences"] * 0.5
    assert set(record["growth"]) == set(STAGES) and "hours_15gb_64_cores" in record["growth"]["tokens"]
    assert len(scale_rows(record)) == 2 * len(STAGES)
    assert "tokenizer" in printed and "wrote" in printed
    # the generated text of ``data.train``'s words, per size, and the runs' artifacts under --out
    assert (out / "text" / "400K" / "generated.json").is_file()
    assert (out / "artifacts" / "scale-400K" / "tokens" / "train.idx").is_file()


def test_sizes_are_read_as_a_user_writes_them():
    assert parse_size("512K") == 512 * 1024 and parse_size("1.5G") == int(1.5 * 2**30)
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")


def test_the_docs_tables_are_the_recorded_runs():
    """docs/scale.md shows exactly the tables rendered from the committed records (docs/scale.json of
    ``azllm bench scale``, docs/peers.json of ``azllm bench peers``): no number typed by hand."""
    from azllm.recipes.scale import scale_markdown
    from conftest import REPO

    record = json.loads((REPO / "docs" / "scale.json").read_text())
    peers = json.loads((REPO / "docs" / "peers.json").read_text())
    want = scale_markdown(record, peers)
    assert want in (REPO / "docs" / "scale.md").read_text(), "paste scale_markdown(record, peers) into docs/scale.md"
    assert [r["size"] for r in record["sizes"]][-1] == "1G" and peers["bytes"] >= 200e6
    assert (REPO / "docs" / "scale.png").is_file()
