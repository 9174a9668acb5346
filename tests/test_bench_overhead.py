"""The training path's overhead benchmark (azllm.bench.overhead) and what keeps the path lean: the allocator setting
on CPU and a throughput clock that never syncs a GPU on its own. Tiny shapes, no speed asserted (the benchmark
measures speed, not the tests)."""

import pytest
import torch
from train_helpers import data  # noqa: F401

from azllm.bench import overhead
from conftest import TINY_MODEL

TINY = {"block_size": 32, "batch_size": 2, "max_steps": 8, "warmup_steps": 2, "logging_steps": 4, "untimed_steps": 2}


def _train(**kw) -> dict:
    """The loop both paths run, as the recipe builds it: the config's defaults, :data:`TINY`, fp32, no evaluation
    or checkpoint before the last step."""
    import dataclasses

    from config_helpers import default_spec

    spec = default_spec("train", TINY, precision="fp32", eval_steps=9, save_steps=9, eval_max_tokens=128, **kw)
    return dataclasses.asdict(spec)


def _model_spec() -> dict:
    from config_helpers import default_spec

    return default_spec("model", {"preset": "tiny", "config": TINY_MODEL}).to_dict()


def test_compare_runs_both_paths_in_a_fresh_process_and_returns_the_fields(data):
    res = overhead.compare(
        tokenizer=data["tokenizer"].path,
        train_file=data["train"],
        val_file=data["val"],
        model_spec=_model_spec(),
        train=_train(report_to=()),
        rounds=1,
        show_progress=False,
    )
    assert [r["order"] for r in res["rows"]] == ["bare then trainer"]  # a second round flips the order
    for r in res["rows"]:
        assert r["bare"] > 0 and r["trainer"] > 0 and r["ratio"] == pytest.approx(r["trainer"] / r["bare"])
        assert r["bare step ms"] > 0 and r["trainer step ms"] > 0
    assert res["ratio"] == pytest.approx(res["trainer"] / res["bare"])
    assert res["ratio_min"] <= res["ratio_max"] and res["tokens_per_step"] == 2 * 32 and res["steps"] == 8
    assert res["freed_memory_kept"] is True  # Linux, glibc, no MALLOC_* variables here


def test_both_paths_train_the_same_model_on_the_same_schedule(data, tmp_path):
    """The same model from the same seed, the same schedule and logging steps: both read the loss at steps 4 and
    8, below ln V (their samplers draw the windows in different orders), and neither saves inside the timed steps."""
    spec = overhead._spec(_train(report_to=()))
    V = data["tokenizer"].vocab_size
    b = overhead.bare_loop(overhead._model(_model_spec(), tokenizer=data["tokenizer"]), spec, train_file=data["train"])
    r = overhead.trainer_path(
        overhead._model(_model_spec(), tokenizer=data["tokenizer"]),
        spec,
        tokenizer=data["tokenizer"],
        train_file=data["train"],
        val_file=data["val"],
        output_dir=tmp_path / "run",
    )
    for x in (b, r):
        assert x["timed_steps"] == 8 - 2 and len(x["losses"]) == 2 and x["tokens_per_s"] > 0
        assert x["losses"][-1] < torch.log(torch.tensor(float(V))).item()
    assert not list((tmp_path / "run").glob("checkpoint-[1-7]"))  # nothing saved inside the timed steps
