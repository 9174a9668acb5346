"""The accelerate launch configs (FSDP, DeepSpeed ZeRO-2/3) load with accelerate's own reader, and the known-bad
combination (Liger fused linear cross-entropy under ZeRO-3) is refused before anything is built."""

from pathlib import Path

import pytest

from azllm.recipes.train import distributed_guard
from azllm.config import load_params

CONFIGS = Path(__file__).resolve().parent.parent / "accelerate"


@pytest.mark.parametrize("name,kind,stage", [("fsdp", "FSDP", None), ("deepspeed_zero2", "DEEPSPEED", 2),
                                             ("deepspeed_zero3", "DEEPSPEED", 3)])
def test_accelerate_configs_load(name, kind, stage):
    from accelerate.commands.config.config_args import load_config_from_file

    c = load_config_from_file(str(CONFIGS / f"{name}.yaml"))
    assert c.distributed_type.value == kind and c.mixed_precision == "bf16" and c.num_processes == 8
    if kind == "FSDP":
        assert c.fsdp_config["fsdp_version"] == 2 and c.fsdp_config["fsdp_reshard_after_forward"] is True
        assert c.fsdp_config["fsdp_transformer_layer_cls_to_wrap"] == "LlamaDecoderLayer"
    else:
        assert c.deepspeed_config["zero_stage"] == stage


def test_liger_flce_under_zero3_is_refused():
    cfg = load_params(None, overrides={"model": {"liger": {"fused_linear_cross_entropy": True}}})
    zero3 = {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}
    with pytest.raises(ValueError, match="ZeRO-3"):
        distributed_guard(cfg, zero3)
    distributed_guard(cfg, {**zero3, "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2"})  # ZeRO-2: fine
    distributed_guard(load_params(None), zero3)  # ZeRO-3 without the kernel: fine
