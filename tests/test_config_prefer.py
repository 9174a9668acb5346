"""The preference section (azllm.config.prefer): its defaults, refused values, and the loop settings it takes from
the sft section."""

import pytest

from azllm.config import load_params


def test_defaults_validate_and_bad_values_are_refused():
    p = load_params(None).preference
    assert p.method == "dpo" and p.beta == 0.1 and p.loss_type == "sigmoid" and p.build
    bad_values = (
        ({"beta": 0}, "beta"),
        ({"method": "ppo"}, "method"),
        ({"lr_max": 1}, "lr_max"),
        ({"sft_weight": -1}, "sft_weight"),
        ({"method": "kto", "sft_weight": 0.5}, "sft_weight is DPO's"),
    )
    for bad, match in bad_values:
        with pytest.raises(ValueError, match=match):
            load_params(None, overrides={"preference": bad})


def test_the_spec_takes_what_the_section_does_not_name_from_sft():
    from azllm.recipes.prefer import preference_spec

    cfg = load_params(None, overrides={"preference": {"beta": 0.3, "max_steps": 7}, "sft": {"grad_clip": 0.5}})
    spec = preference_spec(cfg)
    assert spec.beta == 0.3 and spec.max_steps == 7 and spec.grad_clip == 0.5 and spec.method == "dpo"
    assert spec.betas == tuple(cfg.sft.betas) and spec.resume == cfg.sft.resume


def test_the_gpu_dpo_params_build_trls_config_for_the_1b_shape(tmp_path):
    """params/gpu_dpo.yaml as the GPU run would take it: the spec, TRL's DPOConfig, and Llama-3.2-1B's shape built on
    the meta device (no weights, no GPU)."""
    import torch
    from trl import DPOConfig

    from azllm.loop import training_arguments
    from azllm.model import build_model, model_config
    from azllm.recipes.prefer import preference_spec
    from conftest import REPO

    cfg = load_params(REPO / "params" / "gpu_dpo.yaml")
    spec = preference_spec(cfg)
    with torch.device("meta"):
        model = build_model(model_config("1b", 128256))
    n = sum(p.numel() for p in model.parameters())
    assert 1.0e9 < n < 1.6e9
    args = training_arguments(
        DPOConfig,
        tmp_path,
        spec,
        n_params=n,
        beta=spec.beta,
        max_length=spec.max_length,
        precompute_ref_log_probs=spec.precompute_ref_log_probs,
        loss_type=[spec.loss_type],
    )
    assert args.beta == 0.1 and args.precompute_ref_log_probs and args.loss_type == ["sigmoid"]
    assert args.per_device_train_batch_size == 8 and args.gradient_accumulation_steps == 2 and args.bf16
