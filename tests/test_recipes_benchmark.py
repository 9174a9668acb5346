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
