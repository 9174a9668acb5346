"""The accelerate launch configs (FSDP, DeepSpeed ZeRO-2/3) load with accelerate's own reader, the DeepSpeed ones
agree with the Trainer for every params file (accelerate's launch environment through transformers' DeepSpeed
checks), and the known-bad combination (Liger fused linear cross-entropy under ZeRO-3) is refused before anything
is built."""

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from azllm.config import load_params
from azllm.recipes.train import distributed_guard, train_spec

CONFIGS = Path(__file__).resolve().parent.parent / "accelerate"


@pytest.mark.parametrize(
    "name,kind,stage",
    [("fsdp", "FSDP", None), ("deepspeed_zero2", "DEEPSPEED", 2), ("deepspeed_zero3", "DEEPSPEED", 3)],
)
def test_accelerate_configs_load(name, kind, stage):
    from accelerate.commands.config.config_args import load_config_from_file

    c = load_config_from_file(str(CONFIGS / f"{name}.yaml"))
    assert c.distributed_type.value == kind and c.num_processes == 8
    # DeepSpeed: the precision is the Trainer's (train.precision), see test_deepspeed_config_agrees_with_the_trainer
    assert c.mixed_precision == ("bf16" if kind == "FSDP" else "no")
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


PARAMS = sorted((Path(__file__).resolve().parent.parent / "params").glob("*.yaml"))
# each shipped params file as it is, and one that sets every Trainer-owned value away from the configs' old ones
CASES = [(p, None) for p in PARAMS] + [
    (
        CONFIGS.parent / "params" / "sagemaker.yaml",
        {"train": {"batch_size": 2, "grad_accum": 8, "grad_clip": 0.5, "precision": "fp32"}},
    )
]


def _launch_env(config: Path, params: Path) -> dict[str, str]:
    """The ``ACCELERATE_*`` variables that ``accelerate launch --config_file CONFIG -m azllm train PARAMS`` gives
    the training processes: accelerate's own parser, config reader and DeepSpeed environment builder, as in its
    ``launch_command`` (which then starts the processes with this environment)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    args = launch_command_parser().parse_args(["--config_file", str(config), "-m", "azllm", "train", str(params)])
    args, defaults, mp_from_config = _validate_launch_command(args)
    assert args.use_deepspeed
    fields = list(defaults.deepspeed_config) + (["mixed_precision"] if mp_from_config else [])
    args.deepspeed_fields_from_accelerate_config = ",".join(fields)  # as launch_command sets it
    _, env = prepare_deepspeed_cmd_env(args)
    return {k: v for k, v in env.items() if k.startswith("ACCELERATE_")}


@pytest.mark.parametrize("params,overrides", CASES, ids=[p.stem + ("-changed" if o else "") for p, o in CASES])
@pytest.mark.parametrize("name", ["deepspeed_zero2", "deepspeed_zero3"])
def test_deepspeed_config_agrees_with_the_trainer(name, params, overrides, monkeypatch, tmp_path):
    """Every shipped DeepSpeed launch config with every shipped params file gets past transformers' DeepSpeed
    checks, and the DeepSpeed config takes the params' accumulation, micro-batch, clipping and precision.
    The path of a launch: accelerate's environment -> azllm's TrainingArguments (their DeepSpeedPlugin, built
    from that environment) -> the Trainer's ``propagate_args_to_deepspeed`` -> ``deepspeed_init``'s
    ``trainer_config_finalize``, which raised "mismatch TrainingArguments values" for grad_accum 4 against
    the ``gradient_accumulation_steps: 1`` these configs used to set (and for bf16 against a fp32 run)."""
    import torch
    from transformers.integrations.deepspeed import propagate_args_to_deepspeed, unset_hf_deepspeed_config

    from azllm import model as azmodel
    from azllm import train as azt

    for k in [k for k in os.environ if k.startswith("ACCELERATE_")]:
        monkeypatch.delenv(k)
    for k, v in _launch_env(CONFIGS / f"{name}.yaml", params).items():
        monkeypatch.setenv(k, v)
    cfg = load_params(params, overrides)
    T = cfg.train
    args = azt._training_arguments(tmp_path, train_spec(cfg), world=1)  # what train_model gives the Trainer
    try:
        plugin = args.deepspeed_plugin
        assert plugin is not None and plugin.zero_stage == int(name[-1])
        plugin.set_mixed_precision(args.mixed_precision)  # what AcceleratorState does with the Trainer's precision
        accelerator = types.SimpleNamespace(state=types.SimpleNamespace(deepspeed_plugin=plugin))  # what it reads
        propagate_args_to_deepspeed(accelerator, args)  # Trainer.create_accelerator_and_postprocess
        with torch.device("meta"):  # the run's model shape, without its weights
            model = azmodel.build_model(
                azmodel.model_config(cfg.model.preset, cfg.tokenizer.vocab_size, **cfg.model.config)
            )
        plugin.hf_ds_config.trainer_config_finalize(args, model, T.max_steps)  # deepspeed_init: raises on mismatch
        ds = plugin.hf_ds_config.config
        assert ds["gradient_accumulation_steps"] == T.grad_accum and ds["gradient_clipping"] == T.grad_clip
        assert ds["train_micro_batch_size_per_gpu"] == T.batch_size
        assert ds["train_batch_size"] == T.batch_size * T.grad_accum * args.world_size
        assert ds["bf16"]["enabled"] == args.bf16 and ds["fp16"]["enabled"] == args.fp16
        assert ds["zero_optimization"]["stage"] == int(name[-1])
    finally:
        unset_hf_deepspeed_config()


@pytest.mark.slow  # two fresh interpreters importing DeepSpeed: 15-25 s on 2 cores
def test_deepspeed_prints_nothing_into_the_pages_on_cpu():
    """Every Trainer imports DeepSpeed (pinned); on a machine without CUDA its accelerator detection printed
    "Setting accelerator to CPU" on stdout, i.e. into the training notebook's page, unless the run's setup names
    the accelerator (azllm.utils.route_library_output)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("the line is printed only where no CUDA device is found")
    code = "from deepspeed import DeepSpeedEngine"  # what accelerate's unwrap_model imports in every Trainer
    env = {k: v for k, v in os.environ.items() if k != "DS_ACCELERATOR"}
    bare = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert bare.returncode == 0 and "Setting accelerator to CPU" in bare.stdout, bare.stderr[-2000:]
    routed = subprocess.run(
        [sys.executable, "-c", f"from azllm.utils import route_library_output; route_library_output(); {code}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert routed.returncode == 0 and routed.stdout == "", routed.stdout + routed.stderr[-2000:]
