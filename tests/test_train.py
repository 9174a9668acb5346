"""Training with the HF Trainer on token files: resume equivalence, NaN stop, checkpoints, bits per byte, LoRA
adapters, generation and the notebook (papermill)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from train_helpers import data, tiny_params  # noqa: F401

from conftest import FIXTURES, run_notebooks

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
warnings.filterwarnings("ignore")


def _run(data, out, **kw):
    from azllm.recipes.train import train_model as train

    P = tiny_params(data["art"], **kw.pop("train", {}))
    return train(P, data, output_dir=out, progress=False, **kw)


def _losses(r):
    return {h["step"]: h["loss"] for h in r["curves"]["train"]}


@pytest.fixture(scope="module")
def full_run(data, tmp_path_factory):
    return _run(data, tmp_path_factory.mktemp("full") / "run", resume=False)


def test_full_run_results_and_checkpoints(full_run):
    r = full_run
    assert r["steps"] == 12 and not r["cached"]
    losses = _losses(r)
    assert sorted(losses) == list(range(1, 13))
    assert np.mean([losses[s] for s in (10, 11, 12)]) < np.mean([losses[s] for s in (1, 2, 3)]) - 0.3
    lrs = [h["lr"] for h in r["curves"]["train"]]
    assert max(lrs) == pytest.approx(3e-3, rel=0.05) and lrs.index(max(lrs)) <= 2  # warmup, then cosine decay
    assert all(a >= b for a, b in zip(lrs[2:], lrs[3:])) and 3e-4 <= lrs[-1] < 4e-4  # cosine to 0.1 * lr
    ev = r["curves"]["eval"]
    assert set(ev) == {"val", "flores"} and [e["step"] for e in ev["val"]] == [6, 12]
    for f in r["final"].values():
        assert f["ppl"] == pytest.approx(math.exp(f["loss"]))
        assert 0.5 < f["bpb"] < 8.0
    t = r["throughput"]
    assert t["tokens_per_s"] > 0 and t["step_time_s"] > 0 and t["peak_rss_mb"] > 50
    assert t["tokens_per_step"] == 4 * 32 and t["timed_steps"] >= 5
    assert r["liger"]["available"] is False and r["liger"]["applied"] == []
    out = Path(r["output_dir"])
    cks = sorted(p.name for p in out.glob("checkpoint-*"))
    assert cks == ["checkpoint-12", "checkpoint-8"]  # save_total_limit=2 keeps the last two
    for ck in cks:
        files = {p.name for p in (out / ck).iterdir()}
        assert {
            "model.safetensors",
            "optimizer.pt",
            "scheduler.pt",
            "rng_state.pth",
            "trainer_state.json",
            "azllm_complete.json",
        } <= files
        assert "pytorch_model.bin" not in files  # (training_args.bin is the Trainer's own, never loaded)
    assert (Path(r["final_dir"]) / "model.safetensors").is_file()
    assert list(out.glob("runs/*/events.out.tfevents.*"))  # TensorBoard logs in the run folder by default
    assert json.loads((out / "results.json").read_text())["final"] == json.loads(json.dumps(r["final"]))


def test_latest_checkpoint_ignores_incomplete(full_run, tmp_path):
    from azllm.callbacks import latest_checkpoint

    out = Path(full_run["output_dir"])
    assert latest_checkpoint(out).name == "checkpoint-12"
    half = tmp_path / "run"
    (half / "checkpoint-4").mkdir(parents=True)
    (half / "checkpoint-4" / "azllm_complete.json").write_text("{}")
    (half / "checkpoint-8").mkdir()  # interrupted while writing: no marker
    (half / "checkpoint-8" / "model.safetensors").write_bytes(b"partial")
    assert latest_checkpoint(half).name == "checkpoint-4"
    assert latest_checkpoint(tmp_path / "nothing") is None


def test_bits_per_byte_matches_manual_computation(data, full_run):
    """bpb = summed NLL / ln 2 / UTF-8 bytes of the predicted tokens' text, recomputed here by hand."""
    from azllm.tokens import TokenFile
    from azllm.train import count_bytes, load_trained

    tok = data["tokenizer"]
    assert count_bytes(tok.encode("Salam") + [tok.eos_id] + tok.encode("dünya"), tok) == 5 + 1 + 6
    model = load_trained(full_run["final_dir"]).eval()
    tf = TokenFile(data["val"], tok)
    n = full_run["eval_sets"]["val"]["windows"]
    B = 32
    ids = torch.from_numpy(np.asarray(tf.tokens[: n * B], dtype=np.int64).reshape(n, B))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    nll = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="sum"
    ).item()
    text_bytes = sum(
        len(tok.decode([t for t in row if t != tok.eos_id]).encode())
        for row in ids[:, 1:].tolist()
        if tok.eos_id not in row
    )
    assert full_run["eval_sets"]["val"]["bytes"] >= text_bytes
    bpb = nll / math.log(2) / full_run["eval_sets"]["val"]["bytes"]
    assert full_run["final"]["val"]["bpb"] == pytest.approx(bpb, rel=1e-4)
    assert full_run["final"]["val"]["loss"] == pytest.approx(nll / ids[:, 1:].numel(), rel=1e-4)
    # the uniform baseline of the same set: log2(V) bits for every predicted token, over the same bytes
    uniform = math.log2(logits.shape[-1]) * ids[:, 1:].numel() / full_run["eval_sets"]["val"]["bytes"]
    assert full_run["final"]["val"]["uniform_bpb"] == pytest.approx(uniform, rel=1e-9)


def test_killed_and_resumed_run_follows_the_same_curve(data, full_run, tmp_path):
    """A run SIGKILLed after step 6 (last complete checkpoint: 4) and resumed reproduces the uninterrupted one."""
    out = tmp_path / "run"
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"art": str(data["art"]), "output_dir": str(out), "kill_at_step": 6}))
    p = subprocess.run(
        [PY, str(REPO / "tests" / "train_entry.py"), str(spec)], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == -9, p.stderr[-3000:]
    assert not (out / "results.json").exists()
    from azllm.callbacks import latest_checkpoint

    assert latest_checkpoint(out).name == "checkpoint-4"
    r = _run(data, out, resume=True)
    assert r["resumed_from"].endswith("checkpoint-4")
    a, b = _losses(full_run), _losses(r)
    assert sorted(b) == list(range(1, 13))
    for s in range(1, 13):
        assert b[s] == pytest.approx(a[s], abs=1e-4), (s, a[s], b[s])
    assert r["final"]["val"]["loss"] == pytest.approx(full_run["final"]["val"]["loss"], abs=1e-4)
    # a finished run is not trained again
    again = _run(data, out, resume=True)
    assert again["cached"] and again["final"] == json.loads(json.dumps(r["final"]))


def test_a_folder_holding_another_runs_checkpoints_is_trained_afresh(data, full_run, tmp_path):
    """The same folder, other settings (a run key of its own): the other run's checkpoints are not resumed from,
    so what the folder's old run learned never passes for the new one."""
    import shutil

    from azllm.callbacks import latest_checkpoint

    out = tmp_path / "run"
    shutil.copytree(full_run["output_dir"], out)
    (out / "results.json").unlink()
    assert latest_checkpoint(out).name == "checkpoint-12"
    assert latest_checkpoint(out, key=full_run["key"]).name == "checkpoint-12"
    assert latest_checkpoint(out, key="another run") is None
    r = _run(data, out, resume=True, train={"lr": 1e-3})
    assert r["key"] != full_run["key"] and r["resumed_from"] is None and sorted(_losses(r)) == list(range(1, 13))
    assert latest_checkpoint(out, key=r["key"]).name == "checkpoint-12"


def test_grad_accumulation_and_checkpointing_match_the_plain_run(data, full_run, tmp_path):
    """Batch 2 x 2 accumulation steps with gradient checkpointing = batch 4: same samples, same losses."""
    r = _run(
        data,
        tmp_path / "run",
        max_steps=3,
        resume=False,
        train={"batch_size": 2, "grad_accum": 2, "gradient_checkpointing": True},
    )
    a, b = _losses(full_run), _losses(r)
    for s in (1, 2, 3):
        assert b[s] == pytest.approx(a[s], abs=2e-4), (s, a[s], b[s])


@pytest.mark.parametrize("logging_steps", [1, 4])
def test_nan_loss_stops_and_keeps_last_good_checkpoint(data, tmp_path, logging_steps):
    """The loss flag is read at logging steps and before checkpoints only (no per-step sync): with logging every 4
    steps the NaN of step 6 is caught at step 8, still before checkpoint-8 is written."""
    from transformers import TrainerCallback

    from azllm.callbacks import NonFiniteLossError, latest_checkpoint

    class Poison(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kw):
            if state.global_step == 5:
                with torch.no_grad():
                    model.model.norm.weight.fill_(float("nan"))

    out = tmp_path / "run"
    with pytest.raises(NonFiniteLossError, match=r"loss is nan/inf at step 6.*checkpoint-4"):
        _run(data, out, resume=False, callbacks=[Poison()], train={"logging_steps": logging_steps})
    ck = latest_checkpoint(out)
    assert ck.name == "checkpoint-4" and not (out / "checkpoint-8").exists()
    assert not (out / "results.json").exists()
    from safetensors.torch import load_file

    assert all(torch.isfinite(t).all() for t in load_file(ck / "model.safetensors").values())


def test_lora_run_saves_adapters_only_and_generates(data, full_run, tmp_path):
    from azllm.train import generate, load_trained

    r = _run(
        data,
        tmp_path / "lora",
        method="lora",
        base=full_run["final_dir"],
        max_steps=4,
        train={"save_steps": 4, "eval_steps": 4},
        resume=False,
    )
    assert r["parameters"]["trainable"] < r["parameters"]["total"] / 3
    ck = Path(r["checkpoint"])
    files = {p.name for p in ck.iterdir()}
    assert "adapter_model.safetensors" in files and "model.safetensors" not in files
    model = load_trained(r["final_dir"])
    rows = generate(model, data["tokenizer"], ["Azərbaycan"], max_new_tokens=8)
    assert rows[0]["prompt"] == "Azərbaycan" and isinstance(rows[0]["greedy"], str) and rows[0]["sampled"]
    assert generate(model, data["tokenizer"], ["Azərbaycan"], max_new_tokens=8) == rows  # seeded sampling


@pytest.mark.slow  # ~40-75 s: a kernel, a tokenizer, a training run and a QLoRA run in a child process
def test_notebook_03_runs_under_papermill(tmp_path, monkeypatch):
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    monkeypatch.setenv("AZLLM_DATA_ROOT", str(FIXTURES))
    run_dir, ok = run_notebooks(REPO / "params" / "tiny.yaml", reports_dir=tmp_path / "reports", notebooks=["03_train"])
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert ok, metrics["notebooks"]
    m = metrics["metrics"]["train"]
    assert m["final"]["val"]["bpb"] > 0 and m["tokens_per_s"] > 0
    assert m["final"]["val"]["loss"] < m["first_val_loss"]
    assert (run_dir / "03_train.html").is_file()


@pytest.fixture(scope="module")
def extended_lora(data, tmp_path_factory):
    """A LoRA run on a tiny BPE model whose tokenizer is extended by 40 Azerbaijani tokens (trainable rows)."""
    from azllm.data import iter_documents, resolve_source
    from azllm.recipes.tokens import prepare_data
    from azllm.recipes.train import train_model as train
    from azllm.vocab import extend_tokenizer

    tmp = tmp_path_factory.mktemp("ext")
    bpe = {"run_name": "bpe", "tokenizer": {"model_type": "bpe"}}
    Pb = tiny_params(data["art"], bpe, max_steps=4)
    db = prepare_data(Pb, progress=False)
    base = train(Pb, db, output_dir=tmp / "base", progress=False, resume=False)
    docs = list(iter_documents(resolve_source({"path": "data/az/train/*.txt"}, FIXTURES)))
    folder = extend_tokenizer(db["tokenizer"].path, docs, 40, tmp / "tok")
    over = {
        **bpe,
        "run_name": "ext",
        "tokens": {"tokenizer": str(folder), "dir": str(tmp / "tokens")},
        "model": {"base": base["final_dir"]},
    }
    P = tiny_params(data["art"], over, method="lora")
    return {"over": over, "data": prepare_data(P, progress=False), "P": P}


def test_lora_with_new_rows_killed_and_resumed_follows_the_same_curve(data, extended_lora, tmp_path):
    """Resume of an adapter run: LoRA + trainable token rows, SIGKILLed after step 6, resumed from checkpoint 4,
    reproduces the uninterrupted run's losses, and the final adapter holds the trained rows."""
    from azllm.recipes.train import train_model as train

    e = extended_lora
    full = train(e["P"], e["data"], output_dir=tmp_path / "full", progress=False, resume=False)
    assert full["new_rows"] == "40 new rows: tokens" and "vocabulary extended" in full["source"]
    out = tmp_path / "run"
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "art": str(data["art"]),
                "output_dir": str(out),
                "kill_at_step": 6,
                "overrides": e["over"],
                "train": {"method": "lora"},
            }
        )
    )
    p = subprocess.run(
        [PY, str(REPO / "tests" / "train_entry.py"), str(spec)], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == -9, p.stderr[-3000:]
    r = train(e["P"], e["data"], output_dir=out, progress=False, resume=True)
    assert r["resumed_from"].endswith("checkpoint-4")
    a, b = _losses(full), _losses(r)
    assert sorted(b) == list(range(1, 13))
    for s in range(1, 13):
        assert b[s] == pytest.approx(a[s], abs=1e-4), (s, a[s], b[s])
    from safetensors.torch import load_file

    saved = load_file(Path(r["final_dir"]) / "adapter_model.safetensors")
    assert any("trainable_tokens" in k for k in saved)


def test_sigterm_writes_a_complete_checkpoint_and_the_restart_ends_with_the_same_weights(data, full_run, tmp_path):
    """A spot interruption: SIGTERM during step 6 (checkpoints every 4 steps) -> step 6 finishes, checkpoint-6 is
    written complete, the process exits 0 with no results; the restarted run resumes there and ends equal to the
    uninterrupted run (same losses, same final weights)."""
    from safetensors.torch import load_file

    from azllm.callbacks import latest_checkpoint

    out = tmp_path / "run"
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"art": str(data["art"]), "output_dir": str(out), "term_at_step": 6}))
    p = subprocess.run(
        [PY, str(REPO / "tests" / "train_entry.py"), str(spec)], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {
        "interrupted": "SIGTERM",
        "steps": 6,
        "checkpoint": str(out / "checkpoint-6"),
        "rank": 0,
    }
    assert latest_checkpoint(out).name == "checkpoint-6" and not (out / "results.json").exists()
    r = _run(data, out, resume=True)
    assert r["resumed_from"].endswith("checkpoint-6") and r["steps"] == 12
    a, b = _losses(full_run), _losses(r)
    assert all(b[s] == pytest.approx(a[s], abs=1e-4) for s in range(1, 13))
    wa = load_file(Path(full_run["final_dir"]) / "model.safetensors")
    wb = load_file(Path(r["final_dir"]) / "model.safetensors")
    assert all(torch.allclose(wa[k], wb[k], atol=1e-5) for k in wa)


def test_two_stage_schedule_trains_the_new_rows_alone_first(extended_lora, tmp_path):
    """train.rows_only_steps: the new token rows train from step 1; LoRA's matrices stay at their init (B = 0)
    until the stage ends, then train too."""
    from transformers import TrainerCallback

    from azllm.recipes.train import train_model as train

    seen = []

    class Watch(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kw):
            named = dict(model.named_parameters())
            lora_b = sum(float(p.abs().sum()) for n, p in named.items() if "lora_B" in n)
            rows = sum(float(p.abs().sum()) for n, p in named.items() if "trainable_tokens_delta" in n)
            seen.append((state.global_step, lora_b, rows))

    e = extended_lora
    P = tiny_params(tmp_path, e["over"], method="lora", rows_only_steps=3, max_steps=5, save_steps=5, eval_steps=5)
    train(P, e["data"], output_dir=tmp_path / "run", progress=False, resume=False, callbacks=[Watch()])
    assert [s for s, _, _ in seen] == [1, 2, 3, 4, 5]
    assert all(b == 0 and r > 0 for s, b, r in seen if s <= 3)
    assert all(b > 0 for s, b, _ in seen if s > 3)


def test_evaluation_windows_spread_over_the_whole_validation_file(data, tmp_path):  # noqa: F811
    """A validation file in corpus order (a first source, then a second): a capped evaluation set reads windows from
    its start to its end, evenly spaced, and the whole file when the cap covers it (the start alone would measure the
    first source only)."""
    from azllm.tokens import TokenFile, TokenWindowDataset
    from azllm.train import make_eval_set

    tok, B = data["tokenizer"], 32
    tf = TokenFile(data["train"], tok)
    total = len(TokenWindowDataset(tf, B))
    assert total > 40
    few = make_eval_set(tf, tok, B, max_tokens=10 * B)
    ks = few["dataset"].indices
    assert few["windows"] == len(ks) == 10 and ks[0] == 0 and ks[-1] == total - 1
    assert all(b - a >= (total - 1) // 9 for a, b in zip(ks, ks[1:]))
    first = few["dataset"][0]["input_ids"]
    assert torch.equal(first, torch.from_numpy(tf.tokens[:B].astype(np.int64)))
    every = make_eval_set(tf, tok, B, max_tokens=None)
    assert every["dataset"].indices == list(range(total)) and every["windows"] == total
