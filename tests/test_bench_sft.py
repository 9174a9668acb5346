"""The SFT overhead benchmark's paths do the same work: a bare TRL SFTTrainer and azllm's run_sft, from the
same base, template, adapters and conversations, log the same losses and count the same tokens (the ratio it
reports is then the cost of azllm's additions; the speed itself is measured by `azllm bench sft`, not here)."""

import dataclasses
import json

import pytest
from sft_helpers import conversations, tiny_base, tiny_spec  # noqa: F401  (fixtures)

from azllm.bench.sft import StepTimer, measure_sft


def test_both_paths_train_the_same_losses_on_the_same_tokens(tiny_base, conversations, tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps(conversations[:24], ensure_ascii=False))
    job = {
        "base": str(tiny_base),
        "conversations": str(f),
        "method": "lora",
        "lora": {"r": 4, "alpha": 8, "dropout": 0.0},
        "spec": dataclasses.asdict(
            tiny_spec(
                max_steps=6,
                batch_size=2,
                max_length=256,
                logging_steps=1,
                untimed_steps=2,
                keep_best=False,
                eval_steps=1000,
                report_to=(),
            )
        ),
        "threads": 1,
        "workdir": str(tmp_path),
        "order": ["bare", "recipe", "loop"],
    }
    r = measure_sft(job)
    b, a = r["bare"], r["recipe"]
    assert b["steps"] == a["steps"] == 6 and b["tokens"] == a["tokens"] > 0
    assert len(b["losses"]) == 6 and b["losses"] == pytest.approx(a["losses"], rel=1e-5)  # compact head: same loss
    assert b["timed_steps"] == a["timed_steps"] == 4 and b["tokens_per_s"] > 0 and a["tokens_per_s"] > 0
    loop = r["loop"]  # the bare PyTorch + PEFT loop: the same shapes, its own order of the conversations
    assert loop["steps"] == 6 and loop["timed_steps"] == 4 and loop["tokens"] > 0 and loop["tokens_per_s"] > 0
    assert r["load_start"] >= 0 and r["load_end"] >= 0 and a["peak_rss_gb"] > 0


def test_the_step_timer_leaves_the_untimed_steps_out():
    from types import SimpleNamespace as NS

    t = StepTimer(untimed_steps=2)
    for step in range(1, 6):
        t.on_step_end(None, NS(global_step=step), None)
    assert len(t.times) == 3
