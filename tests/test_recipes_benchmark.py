"""The benchmark recipe (azllm.recipes.benchmark): the job and variants of the params, the fit planner's models,
the GPU run's params and its CPU dry run."""

from azllm.config import load_params
from azllm.recipes import benchmark
from conftest import REPO


def test_job_and_variant_of_the_params():
    cfg = load_params(REPO / "params/tiny.yaml")
    job = benchmark.benchmark_job(cfg, "/ids.npy", 512)
    assert (job["vocab_size"], job["batch"], job["seq"], job["ids_path"]) == (512, 2, 64, "/ids.npy")
    v = benchmark.benchmark_variant(cfg, "lora+ckpt")
    assert v.lora and v.grad_ckpt and v.lora_r == cfg.benchmark.lora.r


def test_fit_models_and_variants():
    models, variants = benchmark.fit_models(load_params(REPO / "params/tiny.yaml"))
    assert set(models) == {"tiny"} and models["tiny"].vocab_size == 8000
    assert [v.name for v in variants] == ["baseline", "lora"]


def test_gpu_params_dry_run_is_tiny_and_on_cpu():
    import yaml

    raw = yaml.safe_load((REPO / "params/gpu.yaml").read_text())
    dry = benchmark.gpu_params(raw, dry_run=True)
    assert dry["benchmark"]["device"] == "cpu" and dry["run_name"] == "gpu-dry-run"
    assert dry["benchmark"]["variants"] == raw["benchmark"]["variants"]  # the same variants as the GPU run
    assert benchmark.gpu_params(raw, dry_run=False) == raw
    load_params(None, overrides=dry)


def test_the_overhead_benchmark_takes_a_pretrained_base(tmp_path, monkeypatch):
    """``azllm bench overhead PARAMS --base FOLDER``: both paths train LoRA on the base (its own tokenizer, the run's
    Azerbaijani text encoded with it), fresh processes; the load average is recorded."""
    import json

    from sft_helpers import make_base

    from conftest import FIXTURES

    base = make_base(tmp_path / "base")
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    cfg = load_params(
        REPO / "params/tiny.yaml",
        overrides={
            "data": {"root": str(FIXTURES)},
            "train": {"batch_size": 2, "block_size": 32},
            "model": {"lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
        },
    )
    res = benchmark.overhead_benchmark(cfg, rounds=1, steps=6, base=str(base), method="lora")
    (row,) = res["rows"]
    assert row["bare"] > 0 and row["trainer"] > 0 and res["method"] == "lora" and res["base"] == str(base)
    assert res["tokens_per_step"] == 2 * 32 and "load_start" in row and res["cores"] >= 1
    assert json.loads(open(res["path"]).read())["base"] == str(base)
