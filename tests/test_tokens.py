"""Token files as a stage (azllm.tokens): the params section and the notebook on tiny params."""

import json

import pytest
from tokens_helpers import REPO, _split_docs, _word_level, corpus, encoded, tok, tok2  # noqa: F401

from azllm.config import ParamsError, load_params
from conftest import FIXTURES, run_notebooks


def _params(tokens: dict):
    return load_params(None, overrides={"tokens": tokens})


def test_params_schema():
    p = _params({"val_fraction": 0.05})
    assert p.tokens.val_fraction == 0.05 and p.tokens.benchmark.scale == 3
    assert p.tokens.num_workers is None and p.tokens.split_seed == 0
    with pytest.raises(ParamsError, match="allowed keys"):
        _params({"val_fracton": 0.05})
    with pytest.raises(ParamsError, match="tokens.val_fraction: Input should be a valid number"):
        _params({"val_fraction": "a lot"})


@pytest.mark.slow
def test_notebook_runs_on_tiny_params(tmp_path, monkeypatch):
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setenv("AZLLM_DATA_ROOT", str(FIXTURES))
    run_dir, ok = run_notebooks(
        REPO / "params" / "tiny.yaml", reports_dir=tmp_path / "reports", notebooks=["02_tokens"]
    )
    assert ok, (run_dir / "metrics.json").read_text()[-3000:]
    m = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    stats = {r["source"]: r for r in m["tokens_corpus"]["sources"]}
    assert stats["all"]["documents"] > 0 and 1.0 < stats["all"]["tokens_per_word"] < 6.0
    assert m["tokens_split"]["train_tokens"] > m["tokens_split"]["val_tokens"] > 0
    bench = m["tokens_benchmark"]
    rows = {(r["variant"], r["scale"]): r for r in bench["variants"]}
    assert rows[("c", 1)]["tokens_per_s"] > 0 and "c_rss_growth_1x_to_nx_mb" in bench["ratios"]
    assert rows[("limit", 1)]["vs_limit"] == 1.0 and rows[("a", 1)]["vs_a"] == 1.0
    assert (run_dir / "02_tokens.html").is_file()
