"""The adaptation study: notebook 05 end to end on the fixture corpus (tiny params), and the GPU params."""

import json
from pathlib import Path

import pytest

from azllm.config import load_params
from conftest import FIXTURES, run_notebooks

REPO = Path(__file__).resolve().parent.parent


def test_gpu_adapt_params_keep_the_hub_path():
    cfg = load_params(REPO / "params/gpu_adapt.yaml")
    assert cfg.adapt.base == "meta-llama/Llama-3.2-1B" and "05_adapt" in cfg.notebooks
    assert cfg.model.dtype == "bf16" and cfg.adapt.n_new == 8000


@pytest.mark.slow  # ~40 s: an English base, three tokenizers, six adaptation runs, an export
def test_notebook_05_on_tiny_params(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    monkeypatch.setenv("AZLLM_DATA_ROOT", str(FIXTURES))
    run_dir, ok = run_notebooks(REPO / "params/tiny.yaml", reports_dir=tmp_path / "reports", notebooks=["05_adapt"])
    m = json.loads((run_dir / "metrics.json").read_text())
    assert ok, m["notebooks"]
    a = m["metrics"]["adapt"]
    runs = {(r["way"], r["method"]): r for r in a["runs"]}
    assert set(runs) == {(w, me) for w in ("keep", "extend", "swap") for me in ("full", "lora")}
    for r in runs.values():
        assert r["az bpb after"] < r["az bpb before"]  # every way learns Azerbaijani
        assert r["en bpb before"] > 0 and r["en bpb after"] > 0
    assert runs[("extend", "lora")]["new rows"] == "200 new rows: tokens"
    assert runs[("swap", "lora")]["new rows"].endswith(": full")
    tok = {r["way"]: r for r in a["tokenizers"]}
    assert tok["keep"]["English tokens changed"] == 0 and tok["extend"]["vocab"] == tok["keep"]["vocab"] + 200
    assert tok["extend"]["tokens/word flores"] < tok["keep"]["tokens/word flores"]
    export = Path(m["artifacts"]["adapt_export"])
    model = AutoModelForCausalLM.from_pretrained(str(export), local_files_only=True)
    assert model.config.vocab_size == len(AutoTokenizer.from_pretrained(str(export), local_files_only=True))
