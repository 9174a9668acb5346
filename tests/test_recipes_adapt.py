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
        assert r["az_bpb_after"] < r["az_bpb_before"]  # every way learns Azerbaijani
        assert r["en_bpb_before"] > 0 and r["en_bpb_after"] > 0
    assert runs[("extend", "lora")]["new_rows"] == "200 new rows: tokens"
    assert runs[("swap", "lora")]["new_rows"].endswith(": full")
    tok = {r["way"]: r for r in a["tokenizers"]}
    assert tok["keep"]["english_tokens_changed"] == 0
    assert tok["extend"]["vocab_size"] == tok["keep"]["vocab_size"] + 200
    assert tok["extend"]["tokens_per_word"]["flores"] < tok["keep"]["tokens_per_word"]["flores"]
    assert runs[("keep", "lora")]["tokens_per_word"] == tok["keep"]["tokens_per_word"]["flores"]
    # every run's curves read forward: 12 steps evaluated at 6 and 12, both in the fit; one hour of its own steps
    more = {(r["way"], r["method"], r["language"]): r for r in a["one_more_hour"]}
    assert set(more) == {(*k, lang) for k in runs for lang in ("az", "en")}
    for r in more.values():
        assert r["last_step"] == 12 and r["fitted"] == 2 and r["more_steps"] == r["steps_per_hour"] > 12
        assert r["change_after"] == pytest.approx(r["bpb_after"] - r["last_bpb"])
    # the winner is the recipe's (the lowest Azerbaijani bpb), recorded for the index
    assert a["best"] == min(a["runs"], key=lambda r: r["az_bpb_after"])
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


def _run(way, method, az, en, *, az_set="my_az", en_set="val"):
    """An adaptation result (:func:`azllm.recipes.adapt.adapt_run`) with bpb curves ``[before, after]`` on its own
    set names."""
    return {
        "way": way,
        "method": method,
        "vocab_size": 512,
        "az_set": az_set,
        "en_set": en_set,
        "curves": {"eval": {az_set: [{"step": 0, "bpb": az[0]}], en_set: [{"step": 0, "bpb": en[0]}]}},
        "final": {az_set: {"bpb": az[1]}, en_set: {"bpb": en[1]}},
        "throughput": {"tokens_per_s": 100.0},
        "seconds": 12.0,
        "parameters": {"trainable": 10},
        "new_rows": "none",
    }


def test_the_study_rows_and_the_winner_use_each_runs_own_set_names():
    """One row per run (whatever its eval sets are called), the English change, and the winner: the lowest
    Azerbaijani bpb after (what the index shows and notebook 07 instruction-tunes), chosen here once."""
    from azllm.recipes import adapt

    runs = [_run("keep", "full", (3.0, 2.5), (1.5, 1.7)), _run("extend", "lora", (3.1, 2.2), (1.5, 1.6))]
    row = adapt.run_row(runs[0], 2.5)
    assert (row["az_bpb_before"], row["az_bpb_after"], row["en_bpb_before"], row["en_bpb_after"]) == (3, 2.5, 1.5, 1.7)
    assert row["en_bpb_change"] == 1.7 - 1.5 and row["tokens_per_word"] == 2.5 and row["wall_s"] == 12.0
    assert adapt.best_run(runs) is runs[1]
    with pytest.raises(ValueError, match="no adaptation run"):
        adapt.best_run([])
    cfg = load_params(None, overrides={"data": {"eval": {"my_az": {"path": "x.txt"}}}})
    tok_rows = [{"way": w, "tokens_per_word": {"my_az": f}} for w, f in (("keep", 2.5), ("extend", 1.9))]
    rec = adapt.runs_record(cfg, runs, tok_rows)
    assert rec["best"] == adapt.run_row(runs[1], 1.9) and [r["way"] for r in rec["runs"]] == ["keep", "extend"]
    assert rec["steps"] == cfg.adapt.steps
    with pytest.raises(ValueError, match="no adaptation run"):
        adapt.best_run([])


def test_the_training_text_caps_each_genre_and_spreads_the_replay(tmp_path, monkeypatch, data_root):
    """Each file capped at az_bytes_per_file (no genre fills the budget), replayed English at its share of the bytes,
    spread among the Azerbaijani documents; the file is one per content and the rows add up."""
    import json

    from azllm.recipes import adapt

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path))
    over = {"data": {"root": str(data_root)}, "adapt": {"az_train_bytes": 60_000, "az_bytes_per_file": 5_000}}
    cfg = load_params(None, overrides=over)
    path, rows = adapt.training_text(cfg)
    docs = [json.loads(line)["text"] for line in path.read_text().splitlines()]
    assert docs == adapt.az_documents(cfg) and len(rows) >= 12  # every genre, not the first files only
    assert all(r["bytes"] <= 5_000 for r in rows) and sum(r["bytes"] for r in rows) <= 60_000
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert max(r["share"] for r in rows) < 0.1
    cfg_r = load_params(None, overrides={**over, "adapt": {**over["adapt"], "replay": 0.25}})
    path_r, rows_r = adapt.training_text(cfg_r)
    replay = [r for r in rows_r if r["origin"].startswith("replay: ")]
    assert [r["origin"] for r in replay] == ["replay: train.txt"]
    assert replay[0]["share"] == pytest.approx(0.25, abs=0.02)
    mixed = [json.loads(line)["text"] for line in path_r.read_text().splitlines()]
    first_en = next(i for i, d in enumerate(mixed) if d not in docs)
    assert first_en < 5 and mixed[-1] in docs or mixed[-2] in docs  # spread among them, not appended
    assert [d for d in mixed if d in docs] == docs
    assert adapt.training_text(cfg_r) == (path_r, rows_r) and path_r != path
    runs = adapt.way_config(cfg_r, "keep", type("T", (), {"path": "t"})(), "base", type("T", (), {"path": "b"})())
    assert runs.data.train.path == str(path_r) and runs.data.train.max_bytes is None
