"""The adaptation study: notebook 05 end to end on the fixture corpus (tiny params), and the GPU params."""

from pathlib import Path

import pytest

from azllm.config import load_params

REPO = Path(__file__).resolve().parent.parent


def test_gpu_adapt_params_keep_the_hub_path():
    cfg = load_params(REPO / "params/gpu_adapt.yaml")
    assert cfg.adapt.base == "meta-llama/Llama-3.2-1B" and "05_adapt" in cfg.notebooks
    assert cfg.model.dtype == "bf16" and cfg.adapt.n_new == 8000


@pytest.mark.slow  # ~40 s: an English base, three tokenizers, six adaptation runs, an export (+ notebook 06)
def test_notebook_05_on_tiny_params(adapt_report):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, m, _ = adapt_report
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


@pytest.mark.slow  # shares notebook 05's run (eval_helpers.adapt_report)
def test_the_export_of_a_full_run_holds_its_trained_weights(adapt_report):
    """notebook 06 scores each run through its export: a full run's export is its trained model, not the base."""
    import torch
    from safetensors.torch import load_file

    _, _, art = adapt_report
    for way in ("keep", "swap"):
        exported = load_file(str(art / "adapt" / f"{way}-full-export" / "model.safetensors"))
        trained = load_file(str(art / "adapt" / f"{way}-full" / "final" / "model.safetensors"))
        assert set(trained) <= set(exported)
        assert all(torch.equal(exported[k], trained[k]) for k in trained)
