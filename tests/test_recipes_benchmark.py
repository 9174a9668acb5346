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


def _bench_results():
    """Three variants as :func:`azllm.bench.training.run_variants` returns them: two ran, one could not."""
    from azllm import memory as mem

    shape = dict(hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, vocab_size=10)
    zero = {"weights": 0, "grads": 0, "optimizer": 0, "activations": 0, "logits": 0}
    return {
        "device": "cpu",
        "config": shape,
        "tokens": "synthetic",
        "batch": 1,
        "seq": 4,
        "results": [
            {
                "variant": "baseline",
                "status": "ok",
                "tokens_per_s": [100, 110, 90],
                "step_s": [1, 1, 1],
                "peak_mb": [50, 52, 48],
                "predicted": mem.predict_memory(shape, "baseline", 1, 4),
                "spec": {"lora": False},
                "trainable": 1000,
            },
            {
                "variant": "lora",
                "status": "ok",
                "tokens_per_s": [80, 80, 80],
                "step_s": [1, 1, 1],
                "peak_mb": [25, 25, 25],
                "predicted": {**zero, "weights": 2**20, "total": 25 * 2**20},
                "spec": {"lora": True},
                "trainable": 10,
                "traceback": "not recorded",
            },
            {
                "variant": "liger",
                "status": "unavailable",
                "reason": "not available on this device: no CUDA",
                "predicted": {**zero, "total": 1},
            },
        ],
    }


def test_variant_rows_medians_and_ratios_against_the_baseline():
    rows = benchmark.variant_rows(_bench_results())
    assert [r["variant"] for r in rows] == ["baseline", "lora", "liger"]  # never dropped
    base, lora, liger = rows
    assert (base["tokens_per_s_median"], base["tokens_per_s_min"], base["tokens_per_s_max"]) == (100, 90, 110)
    assert base["step_ms_median"] == 1000 and base["peak_mb_median"] == 50
    assert lora["speed_ratio"] == 0.8 and lora["memory_ratio"] == 0.5 and base["speed_ratio"] == 1.0
    assert liger["speed_ratio"] is None and liger["tokens_per_s_median"] is None
    assert liger["note"].startswith("not available")


def test_prediction_rows_and_summary():
    rows = benchmark.prediction_rows(_bench_results())
    lora = rows[1]
    assert lora["predicted_mb"] == 25 and lora["measured_mb"] == 25 and lora["predicted_over_measured"] == 1.0
    assert lora["weights_mb"] == 1 and rows[2]["predicted_over_measured"] is None
    s = benchmark.prediction_summary(rows)
    base = rows[0]
    assert s["n_measured"] == 2
    assert s["max_rel_pred_error"] == max(abs(r["predicted_over_measured"] - 1) for r in rows[:2])
    assert s["baseline"]["logits_share"] == base["logits_mb"] / base["predicted_mb"]


def test_cost_and_job_cost_rows_price_the_measured_speed():
    from azllm import memory as mem

    cfg = load_params(REPO / "params/tiny.yaml")
    res = _bench_results()
    cost = {r["variant"]: r for r in benchmark.cost_rows(cfg, res)}
    price = cfg.benchmark.price_per_hour
    assert cost["baseline"]["usd_per_billion_tokens"] == mem.cost_per_billion_tokens(100, price)
    assert cost["baseline"]["usd_per_billion_tokens_best"] == mem.cost_per_billion_tokens(110, price)
    assert cost["baseline"]["days_per_billion_tokens"] == 1e9 / 100 / 86400
    assert cost["liger"]["usd_per_billion_tokens"] is None
    job = {r["variant"]: r for r in benchmark.job_cost_rows(cfg, res)}
    j = cfg.benchmark.job
    assert set(job) == {"baseline", "lora"}  # nothing measured, nothing priced
    assert job["baseline"]["hours"] == j.tokens / (100 * j.gpus_per_instance * j.instances) / 3600
    assert job["lora"]["checkpoint_gb"] < job["baseline"]["checkpoint_gb"]  # adapters only
    record = benchmark.benchmark_record(res, benchmark.variant_rows(res), [], list(cost.values()), [])
    assert (record["fastest_variant"], record["smallest_memory_variant"], record["cheapest_variant"]) == (
        "baseline",
        "lora",
        "baseline",
    )
    assert record["n_ok"] == 2 and record["n_variants"] == 3
    assert all("traceback" not in r for r in record["results"])


def test_fit_rows_name_the_model_and_its_size():
    from azllm import memory as mem

    cfg = load_params(REPO / "params/tiny.yaml")
    rows = benchmark.fit_rows(cfg)
    models, _ = benchmark.fit_models(cfg)
    assert {r["model"] for r in rows} == {"tiny"} and len(rows) == 2 * 2  # 2 variants x 2 budgets
    assert rows[0]["params_m"] == mem.parameter_count(models["tiny"])["total"] / 1e6
    assert {"batch_at_256", "batch_at_1024", "max_tokens_per_step"} <= set(rows[0])
