"""The loop's shared pieces (azllm.loop): one builder of the Trainer's arguments for pretraining and SFT (TRL's
SFTConfig is a TrainingArguments), and the precision rule."""

import dataclasses

import pytest
import torch
from config_helpers import default_spec

from azllm.loop import CPU_BF16_MIN_PARAMS, CPU_BF16_MIN_TOKENS, LoopSpec, precision_flags, training_arguments

SHARED = {
    "max_steps": "max_steps",
    "batch_size": "per_device_train_batch_size",
    "eval_batch_size": "per_device_eval_batch_size",
    "grad_accum": "gradient_accumulation_steps",
    "lr": "learning_rate",
    "warmup_steps": "warmup_steps",
    "weight_decay": "weight_decay",
    "grad_clip": "max_grad_norm",
    "eval_steps": "eval_steps",
    "logging_steps": "logging_steps",
    "save_total_limit": "save_total_limit",
    "seed": "seed",
}


@pytest.mark.parametrize("kind", ["train", "sft"])
def test_pretraining_and_sft_get_their_arguments_from_the_one_builder(kind, tmp_path):
    """Every shared field reaches the Trainer under its own name, the betas included (SFT passed none before)."""
    from transformers import TrainingArguments
    from trl import SFTConfig

    from azllm.sft.train import sft_config
    from azllm.train import _training_arguments

    spec = default_spec(kind, betas=[0.8, 0.9], grad_clip=0.5, eval_batch_size=3)
    if kind == "train":
        args = _training_arguments(tmp_path, spec, world=1)
        assert type(args) is TrainingArguments and args.save_steps == spec.save_steps
    else:
        args = sft_config(tmp_path, spec, eval_on_start=True, world=1)
        assert isinstance(args, SFTConfig) and args.save_steps == spec.eval_steps and args.load_best_model_at_end
    for ours, theirs in SHARED.items():
        assert getattr(args, theirs) == getattr(spec, ours), ours
    assert (args.adam_beta1, args.adam_beta2) == (0.8, 0.9)
    assert args.lr_scheduler_type.value == "cosine_with_min_lr"
    assert args.lr_scheduler_kwargs == {"min_lr_rate": spec.min_lr_ratio}
    assert args.activation_checkpointing is spec.gradient_checkpointing and args.disable_tqdm


def test_both_specs_extend_the_loop_spec():
    from azllm.sft.train import SftSpec
    from azllm.train import TrainSpec

    shared = {f.name for f in dataclasses.fields(LoopSpec)}
    for cls in (TrainSpec, SftSpec):
        assert issubclass(cls, LoopSpec) and shared <= {f.name for f in dataclasses.fields(cls)}
    a = default_spec("train")
    assert "resume" not in a.keyed() and "report_to" not in a.keyed() and "lr" in a.keyed()


def test_an_own_argument_is_laid_over_the_shared_ones(tmp_path):
    from transformers import TrainingArguments

    args = training_arguments(TrainingArguments, tmp_path, default_spec("train"), save_steps=7, max_grad_norm=0.25)
    assert args.save_steps == 7 and args.max_grad_norm == 0.25


def test_precision_auto_is_bf16_on_a_bf16_cpu_for_a_real_size_model(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("a CPU rule")
    monkeypatch.setenv("AZLLM_CPU_BF16", "1")
    assert precision_flags("auto", CPU_BF16_MIN_PARAMS) == {"bf16": True, "fp16": False}
    assert precision_flags("auto", 1_000_000)["bf16"] is False  # the stand-ins stay fp32
    assert precision_flags("auto")["bf16"] is False
    assert precision_flags("auto", 135_000_000, CPU_BF16_MIN_TOKENS)["bf16"] is True  # adaptation: 4 x 256
    assert precision_flags("auto", 135_000_000, 384)["bf16"] is False  # SFT at 1 x 384: casts not paid back
    monkeypatch.setenv("AZLLM_CPU_BF16", "0")
    assert precision_flags("auto", 135_000_000)["bf16"] is False
    assert precision_flags("bf16")["bf16"] is True
    with pytest.raises(ValueError, match="fp16 needs a CUDA GPU"):
        precision_flags("fp16")


def test_the_rule_reads_the_micro_batch_of_each_loop(monkeypatch, tmp_path):
    """The Trainer's arguments of a 135M model on a bf16 CPU: bf16 for adaptation's 4 x 256 windows, fp32 for SFT's
    single conversations of at most 384 tokens."""
    from azllm.sft.train import sft_config
    from azllm.train import _training_arguments

    if torch.cuda.is_available():
        pytest.skip("a CPU rule")
    monkeypatch.setenv("AZLLM_CPU_BF16", "1")
    adapt = default_spec("train", {"batch_size": 4, "block_size": 256})
    sft = default_spec("sft", {"batch_size": 1, "max_length": 384})
    assert _training_arguments(tmp_path, adapt, world=1, n_params=135_000_000).bf16 is True
    assert sft_config(tmp_path, sft, eval_on_start=False, world=1, n_params=135_000_000).bf16 is False
