"""The train recipe (azllm.recipes.train): the params as a ModelSpec and a TrainSpec, what a run's key covers, a
finished run returned as it is, a SageMaker job's folders, the launch guard."""

import warnings

import pytest
from train_helpers import data  # noqa: F401  (module fixture)

from azllm.config import load_params
from azllm.recipes.train import distributed_guard, job_config, model_spec, train_model, train_spec
from azllm.train import run_key


def test_model_spec_of_the_params():
    cfg = load_params(
        None,
        overrides={
            "seed": 3,
            "model": {"lora": {"r": 4, "target_modules": ["q_proj"]}, "liger": {"rope": True}, "new_rows": "full"},
        },
    )
    s = model_spec(cfg, "qlora")
    assert (s.method, s.lora_r, s.target_modules, s.liger, s.new_rows, s.seed) == (
        "qlora",
        4,
        ("q_proj",),
        ("rope",),
        "full",
        3,
    )
    assert model_spec(cfg).method == "full" and model_spec(cfg, base="/b").base == "/b"


def test_the_key_leaves_out_what_does_not_change_the_run():
    cfg = load_params(None)
    m = model_spec(cfg).to_dict()
    k = run_key(model=m, train=train_spec(cfg), tokenizer="t", data={})
    other = load_params(None, overrides={"train": {"resume": False, "report_to": [], "compare": []}})
    assert run_key(model=m, train=train_spec(other), tokenizer="t", data={}) == k
    lr = load_params(None, overrides={"train": {"lr": 0.1}})
    assert run_key(model=m, train=train_spec(lr), tokenizer="t", data={}) != k
    fsdp = load_params(None, overrides={"train": {"fsdp": True}})
    assert run_key(model=m, train=train_spec(fsdp), tokenizer="t", data={}) != k


def test_a_finished_run_is_returned_as_it_is(data):  # noqa: F811
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = train_model(data["P"], data, max_steps=2, progress=False)
        again = train_model(data["P"], data, max_steps=2, progress=False)
    assert not first["cached"] and again["cached"] and again["key"] == first["key"]
    assert again["output_dir"] == first["output_dir"] and first["output_dir"].endswith(f"full-{first['key']}")


def test_job_config_lays_the_channels_over_the_params(tmp_path):
    cfg = job_config(load_params(None), {"data": str(tmp_path), "tokens": str(tmp_path / "t")})
    assert cfg.data.root == str(tmp_path) and cfg.tokens.dir == str(tmp_path / "t")
    assert job_config(load_params(None), {}) == load_params(None)
    # no tokens channel: prepared beside the checkpoints, which a restarted spot job gets back
    kept = job_config(load_params(None), {"checkpoints": str(tmp_path / "ck")})
    assert kept.tokens.dir == str(tmp_path / "ck" / "prepared")


def test_zero3_with_fused_linear_cross_entropy_is_refused():
    cfg = load_params(None, overrides={"model": {"liger": {"fused_linear_cross_entropy": True}}})
    with pytest.raises(ValueError, match="ZeRO-3"):
        distributed_guard(cfg, {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"})


def test_what_notebook_03_records_of_a_run(data):  # noqa: F811
    """run_summary: every final metric per eval set (by the set's own name); data_summary; the curves with the
    approximate training bpb; compare_rows (notebook 03's comparison table)."""
    import math

    from azllm.recipes import train
    from azllm.recipes.benchmark import compare_rows

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = train_model(data["P"], data, max_steps=2, progress=False)
    row = train.run_summary(run)
    assert row["main_steps"] == 2 and row["method"] == "full" and row["liger_applied"] == [] and row["tokens_per_s"] > 0
    assert row["final"] == run["final"] and row["final"]["flores"]["bpb"] == run["final"]["flores"]["bpb"]
    assert row["first_val_loss"] == run["curves"]["eval"]["val"][0]["loss"]
    s = train.data_summary(data, 3.0)
    assert s["tokenizer_vocab"] == data["tokenizer"].vocab_size and s["dev_sets"] == "flores"
    c = train.curves(run, 3.0)
    assert c["eval"] == run["curves"]["eval"]
    assert c["train"][0]["bpb_approx"] == run["curves"]["train"][0]["loss"] / math.log(2) / 3.0
    (cmp,) = compare_rows([run])
    assert cmp["val_bpb"] == round(run["final"]["val"]["bpb"], 4) and cmp["trainable"] == cmp["total"]
