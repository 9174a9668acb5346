"""The one run lifecycle (azllm.lifecycle): a real Trainer on a tiny Llama, stopped by a real SIGTERM, restarted by
its key, found finished by its key; and every stage's run going through it."""

import ast
import json
import os
import signal
from pathlib import Path

import pytest
import torch

from azllm import lifecycle
from azllm.callbacks import SafetyCallback, StopOnSignalCallback, ThroughputCallback, latest_checkpoint
from conftest import TINY_MODEL

AZLLM = Path(lifecycle.__file__).parent


def _trainer(out: Path, kill_at: int | None = None):
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, **TINY_MODEL))
    g = torch.Generator().manual_seed(1)
    rows = [torch.randint(0, 64, (16,), generator=g) for _ in range(24)]
    data = [{"input_ids": r, "labels": r} for r in rows]

    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == kill_at:
                os.kill(os.getpid(), signal.SIGTERM)  # a spot notice, caught by the stop callback's handler

    args = TrainingArguments(
        str(out), max_steps=6, per_device_train_batch_size=2, save_steps=2, logging_steps=1, report_to=[],
        use_cpu=True, disable_tqdm=True, seed=0, save_strategy="steps",
    )  # fmt: skip
    parts = lifecycle.RunParts(SafetyCallback(model, {}, out), ThroughputCallback(32, 1), StopOnSignalCallback())
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[Kill(), parts.stop, parts.throughput])
    trainer.add_callback(parts.safety)
    return trainer, parts


def _run(out: Path, key: str, kill_at: int | None = None, seen: list | None = None):
    trainer, parts = _trainer(out, kill_at)

    def evaluate(trainer, resumed_from):
        (seen if seen is not None else []).append(resumed_from)
        return {"own": trainer.state.global_step, "throughput": {"tokens_per_s": 1.0}}

    return lifecycle.run_trainer(
        trainer, parts, output_dir=out, key=key, resume=True, meta={"key": key}, meta_file="m.json", evaluate=evaluate
    )


def test_a_stopped_run_resumes_by_its_key_and_is_then_found_finished(tmp_path):
    out = tmp_path / "run"
    stopped = _run(out, "k1", kill_at=3)
    assert stopped["interrupted"] == "SIGTERM" and stopped["steps"] == 3
    assert Path(stopped["checkpoint"]).name == "checkpoint-3" and not (out / "results.json").exists()
    assert json.loads((out / "checkpoint-3" / "azllm_complete.json").read_text())["key"] == "k1"
    assert lifecycle.finished_result(out, "k1") is None

    seen: list = []
    done = _run(out, "k1", seen=seen)
    assert seen == [out / "checkpoint-3"] and done["resumed_from"] == str(out / "checkpoint-3")
    assert done["steps"] == 6 and done["own"] == 6 and done["throughput"] == {"tokens_per_s": 1.0}
    # the curve of the whole run: steps 1-3 come back with the checkpoint's log history, once each
    assert [c["step"] for c in done["curves"]["train"]] == [1, 2, 3, 4, 5, 6]
    assert json.loads((Path(done["final_dir"]) / "m.json").read_text()) == {"key": "k1"}
    assert (Path(done["final_dir"]) / "model.safetensors").is_file() and not done["cached"]

    cached = lifecycle.finished_result(out, "k1")
    assert cached["cached"] and cached["own"] == 6 and cached["final_dir"] == done["final_dir"]
    assert lifecycle.finished_result(out, "k2") is None

    other = _run(out, "k2")  # another key in the same folder never resumes from k1's checkpoints
    assert other["resumed_from"] is None and other["steps"] == 6
    assert latest_checkpoint(out, key="k2").name == "checkpoint-6"


def _calls(tree: ast.AST) -> set[str]:
    return {
        n.func.id if isinstance(n.func, ast.Name) else n.func.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))
    }


def _function(path: Path, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text())
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


@pytest.mark.parametrize(
    "module, run", [("train.py", "run_training"), ("sft/train.py", "run_sft"), ("prefer/train.py", "run_preference")]
)
def test_every_stage_runs_through_the_one_lifecycle(module, run):
    """Pretraining (and adaptation), SFT and preference tuning hand their Trainer to ``run_trainer``; distillation
    is a pretraining run with its own loss (``distill_run`` calls ``run_training``)."""
    assert "run_trainer" in _calls(_function(AZLLM / module, run))
    assert "run_training" in _calls(_function(AZLLM / "recipes" / "distill.py", "distill_run"))


def test_only_the_lifecycle_resumes_a_trainer_and_no_stage_imports_another():
    """``trainer.train(resume_from_checkpoint=...)`` is written once (the benchmarks' bare baselines call
    ``trainer.train()`` with no resume), and the stage modules import the lifecycle, not each other."""
    resumes = []
    for path in AZLLM.rglob("*.py"):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Call) and any(k.arg == "resume_from_checkpoint" for k in n.keywords):
                resumes.append(path.relative_to(AZLLM).as_posix())
    assert resumes == ["lifecycle.py"]
    stages = {"train.py": "azllm.train", "sft/train.py": "azllm.sft", "prefer/train.py": "azllm.prefer"}
    for path, own in stages.items():
        tree = ast.parse((AZLLM / path).read_text())
        package = ["azllm", *path.split("/")[:-1]]
        imported = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module is not None:
                base = package[: len(package) - n.level + 1] if n.level else []
                imported.add(".".join([*base, n.module]))
        others = {m for m in stages.values() if m != own}
        assert not {m for m in imported if any(m == o or m.startswith(o + ".") for o in others)}, path


def test_keep_freed_memory_respects_the_environment(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")  # the memory benchmark's setting wins
    assert lifecycle.keep_freed_memory() is False
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0")
    assert lifecycle.keep_freed_memory() is False
    monkeypatch.delenv("GLIBC_TUNABLES")
    assert lifecycle.keep_freed_memory() is True


def test_finding_runs_and_their_results_loads_no_trainer_stack():
    """The recipes that look up runs (finished-run keys, results, exports) import without transformers' Trainer stack
    (its ``trainer_callback`` imports peft, which imports bitsandbytes): a process that only evaluates, distills from
    a finished teacher or deploys does not pay for it. The training modules still load it."""
    import subprocess
    import sys

    probe = (
        "import sys, azllm.recipes.adapt, azllm.recipes.evaluate, azllm.recipes.distill, azllm.recipes.deploy, "
        "azllm.recipes.train, azllm.train, azllm.lifecycle\n"
        "print(sorted(m for m in ('peft', 'bitsandbytes', 'transformers.trainer_callback') if m in sys.modules))\n"
        "import azllm.callbacks\n"
        "print('peft' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split("\n")[:2] == ["[]", "True"], r.stdout
