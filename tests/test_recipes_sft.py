"""The SFT recipe: the data table on the fixture instruction data, other data pointed at by params alone (no code
change), the merged export that plain transformers loads and that generates what the in-memory model generates,
the base chosen from notebook 05's runs, an unreachable base, and `azllm sft` inside a simulated SageMaker job."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from sft_helpers import params, tiny_base  # noqa: F401  (fixture)

from azllm.recipes import sft
from conftest import FIXTURES

REPO = Path(__file__).resolve().parent.parent


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


@pytest.mark.parametrize("fmt", ["instruction_response", "messages"])
def test_another_jsonl_works_with_no_code_change(fmt, tiny_base, tmp_path):
    """Only the params change: a jsonl of {instruction, response} pairs, or of messages lists, trains end to end."""
    if fmt == "messages":
        recs = [
            {
                "messages": [
                    {"role": "system", "content": "Qısa cavab ver."},
                    {"role": "user", "content": f"{i} üstəgəl {i} neçədir?"},
                    {"role": "assistant", "content": f"{2 * i}."},
                ]
            }
            for i in range(24)
        ]
    else:
        recs = [
            {"instruction": f"{i} rəqəmini sözlə yaz, nömrə {i}.", "response": f"Bu, {i} rəqəmidir."} for i in range(24)
        ]
    _jsonl(tmp_path / "mine.jsonl", recs)
    cfg = params(
        tiny_base,
        tmp_path / "art",
        holdout_source="mine",
        sources={"mine": {"path": str(tmp_path / "mine.jsonl"), "origin": "native"}},
    )
    r = sft.sft_job({"params": cfg.to_dict(), "base": str(tiny_base), "method": "lora", "max_steps": 4})
    assert r["steps"] == 4 and r["eval_loss"] > 0 and r["chrf++"] is not None
    assert json.loads((Path(r["output_dir"]) / "answers.json").read_text())["rows"][0]["id"].startswith("mine")


def test_the_export_loads_with_plain_transformers_and_generates_the_same_tokens(tiny_base, tmp_path):
    """LoRA with new role-token rows, merged: AutoModelForCausalLM / AutoTokenizer load the folder offline, its
    chat template renders the training format, and greedy generation on a templated prompt (the export's own
    generation config: stop at <|end|>) equals the in-memory adapter model's tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg = params(tiny_base, tmp_path, max_steps=6, lr=1e-2)
    tok, template = sft.sft_tokenizer(cfg, str(tiny_base))
    data = sft.sft_data(cfg, tok)
    r = sft.sft_run(cfg, base=str(tiny_base), tokenizer=tok, template=template, data=data, progress=False)
    folder = sft.export_sft(cfg, r, base=str(tiny_base), tokenizer=tok, template=template)
    assert {"model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja", "generation_config.json"} <= {
        p.name for p in folder.iterdir()
    }
    assert not (folder / "adapter_config.json").exists()
    plain_tok = AutoTokenizer.from_pretrained(str(folder))
    plain = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    conv = data["held_out"][0]["messages"]
    assert plain_tok.apply_chat_template(conv, tokenize=False) == tok.apply_chat_template(conv, tokenize=False)
    prompt = plain_tok.apply_chat_template(conv[:-1], add_generation_prompt=True, return_tensors="pt", return_dict=True)
    assert (
        prompt["input_ids"][0].tolist()
        == tok.apply_chat_template(conv[:-1], add_generation_prompt=True, return_dict=True)["input_ids"]
    )
    assert plain.generation_config.eos_token_id[0] == template["end_of_turn_id"]
    with torch.no_grad():
        got = plain.generate(**prompt, max_new_tokens=16, do_sample=False)
        mem = r["model"].eval()
        want = mem.generate(
            **prompt,
            max_new_tokens=16,
            do_sample=False,
            eos_token_id=plain.generation_config.eos_token_id,
            pad_token_id=plain.generation_config.pad_token_id,
        )
        diff = (plain(**prompt).logits - mem(**prompt).logits).abs().max()
    assert got.tolist() == want.tolist() and float(diff) < 1e-4


def test_the_stages_output_is_the_run_exported_and_marked_whatever_sft_export_says(tiny_base, tmp_path):
    """What the stages after SFT take (stages.require -> sft_output): the run exported into its folder and marked,
    with sft.export off too; asked again, the marker answers and nothing is written."""
    from azllm.recipes import stages

    cfg = params(tiny_base, tmp_path, export=False)
    said = []
    done = stages.require(cfg, "sft", show=said.append)
    folder = Path(done["artifact"])
    assert (folder / "config.json").is_file() and done["base"] == str(tiny_base) and "building it" in said[0]
    written = (folder / "model.safetensors").stat().st_mtime_ns
    assert stages.require(cfg, "sft", show=said.append) == done and "found by its marker" in said[-1]
    assert (folder / "model.safetensors").stat().st_mtime_ns == written
    # other params (a later stage's setting): the stage is built again from its finished run, and the export of the
    # same run is kept as it is, so what is cached by its weights (preference runs, scores) is still found
    from azllm.config import deep_update, load_params
    from azllm.utils import weights_id

    before = weights_id(folder)
    other = load_params(None, overrides=deep_update(cfg.to_dict(), {"preference": {"lr": 1e-5}}))
    again = stages.require(other, "sft", show=said.append)
    assert "building it" in said[-2] and again["artifact"] == str(folder) and again["params_hash"] == other.hash()
    assert (folder / "model.safetensors").stat().st_mtime_ns == written and weights_id(folder) == before


def test_samples_put_the_base_answer_beside_the_trained_one():
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
    (row,) = sft.samples(after, 1, before=before)
    assert row == {
        "instruction": "Salam?",
        "before_answer": "Hello!",
        "before_chrf": 5.0,
        "answer": "Salam!",
        "chrf": 40.0,
        "reference": "Salam.",
    }
    assert "before_answer" not in sft.samples(after, 2)[1]
    before["rows"].reverse()
    with pytest.raises(ValueError, match="instructions differ"):
        sft.samples(after, 2, before=before)


def test_a_run_row_and_the_main_record():
    result = {
        "method": "lora",
        "packing": True,
        "steps": 8,
        "throughput": {"tokens_per_s": 50.0, "peak_rss_mb": 300.0},
        "eval_loss": 2.5,
        "best_step": 8,
        "parameters": {"trainable": 100},
        "mask": {"share": 0.4, "tokens": 10, "loss_tokens": 4},
        "seconds": 9.0,
    }
    row = sft.run_row(result)
    assert row["peak_mb"] == 300.0 and row["packing"] is True and row["chrf"] is None and row["loss_share"] == 0.4
    on_gpu = sft.run_row({**result, "throughput": {**result["throughput"], "cuda_max_allocated_mb": 99.0}})
    assert on_gpu["peak_mb"] == 99.0  # the GPU's allocation where there is one
    rec = sft.main_record(result, {"chrf++": 7.5, "stopped_share": 0.5})
    assert rec["main"]["chrf"] == rec["chrf"] == 7.5 and rec["mask"] == result["mask"] and rec["stopped_share"] == 0.5


def test_an_unreachable_base_says_what_to_do(tmp_path, monkeypatch):
    import huggingface_hub.constants

    from azllm.sft.train import prepare_model

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    cfg = params("nobody-here/no-such-model", tmp_path)
    with pytest.raises(
        ValueError,
        match=r"tokenizer of base 'nobody-here/no-such-model'.*offline, set sft.base "
        r"to a local folder",
    ):
        sft.sft_tokenizer(cfg, cfg.sft.base)
    with pytest.raises(ValueError, match=r"could not load base model 'nobody-here/no-such-model'"):
        prepare_model(cfg.sft.base, method="lora")


@pytest.mark.slow  # ~40 s: the staged entry in a fresh process
def test_azllm_sft_runs_as_the_staged_job_under_a_simulated_sagemaker_job(tiny_base, tmp_path):
    """What `azllm launch params/sft_sagemaker.yaml` starts: the staged entry runs `azllm sft params.yaml` with the
    chat data as the data channel; checkpoints in the synced folder, the merged export in SM_MODEL_DIR, results and
    answers in SM_OUTPUT_DATA_DIR."""
    import yaml

    from azllm.recipes import launch as L

    p = tmp_path / "p.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "run_name": "sm-sft",
                "launch": {"command": "sft"},
                "model": {"lora": {"r": 4, "alpha": 8}},
                "sft": {
                    "base": str(tiny_base),
                    "holdout_size": 4,
                    "max_length": 256,
                    "max_steps": 4,
                    "eval_steps": 2,
                    "batch_size": 2,
                    "max_new_tokens": 4,
                    "keep_best": False,
                    "save_total_limit": 1,
                },
            }
        )
    )
    src = L.stage_source(p, tmp_path / "code", command="sft")
    env = {
        **os.environ,
        "SM_MODEL_DIR": str(tmp_path / "model"),
        "SM_OUTPUT_DATA_DIR": str(tmp_path / "output"),
        "SM_CHANNEL_DATA": str(FIXTURES),
        "AZLLM_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "AZLLM_ARTIFACTS": str(tmp_path / "art"),
        "PYTHONPATH": str(src),
    }
    env.pop("AZLLM_DATA_ROOT", None)
    proc = subprocess.run(
        [sys.executable, "azllm_train.py", "--params", "params.yaml", "--run_name", "sm"],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "output" / "results.json").read_text())["steps"] == 4
    assert (tmp_path / "output" / "answers.json").is_file()
    assert {"model.safetensors", "chat_template.jinja"} <= {f.name for f in (tmp_path / "model").iterdir()}
    cks = sorted((tmp_path / "checkpoints").glob("checkpoint-*"))
    assert [c.name for c in cks] == ["checkpoint-4"] and (cks[0] / "azllm_complete.json").is_file()


@pytest.mark.slow  # ~70 s: notebook 07 through the report runner, one variant in a fresh process
def test_notebook_07_on_tiny_params(tiny_base, tmp_path, monkeypatch):
    """params/tiny.yaml's sft section on a tiny base folder (notebook 05's stand-in is tested in its own notebook
    test): the page renders the data table, the methods table, the sample answers next to their references and the
    export, with nothing on stderr; metrics.json holds the numbers."""
    import yaml

    from conftest import run_notebooks

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "artifacts"))
    p = yaml.safe_load((REPO / "params" / "tiny.yaml").read_text())
    p["data"]["root"] = str(FIXTURES)
    p["sft"].update(
        base=str(tiny_base),
        holdout_size=5,
        max_steps=8,
        eval_steps=4,
        compare=[{"method": "lora", "packing": True}],
        compare_steps=4,
    )
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(p, allow_unicode=True))
    run_dir, ok = run_notebooks(tmp_path / "p.yaml", reports_dir=tmp_path / "reports", notebooks=["07_sft"])
    assert ok
    m = json.loads((run_dir / "metrics.json").read_text())["metrics"]["sft"]
    assert [r["step"] for r in m["data"]][:4] == ["read", "cleaned", "deduplicated", "held out"]
    assert m["main"]["steps"] == 8 and len(m["variants"]) == 1 and m["variants"][0]["packing"] is True
    assert len(m["samples"]) == 3 and all(s["reference"] and "before_answer" in s for s in m["samples"])
    assert m["main"]["chrf"] == m["chrf"] == m["chrf_before_after"]["after"]
    ch = m["chrf_before_after"]  # chrF++ of the held-out answers, before -> after, with a paired standard error
    assert (
        ch["n"] == m["counts"]["held_out"]
        and ch["verdict"] in ("gain", "loss", "within noise")
        and ch["delta_se"] is not None
    )
    pair = {r["task"]: r for r in m["tasks_before_after"]}  # the forgetting check: notebook 06's tasks
    assert {"sib200_az", "sib200_en", "mmlu_en", "sib200_az_probe"} <= set(pair)
    assert all(r["verdict"] in ("gain", "loss", "within noise") and r["delta_se"] is not None for r in pair.values())
    html = (run_dir / "07_sft.html").read_text()
    assert "Tasks before and after" in html and "chrF++" in html and "exported:" in html
