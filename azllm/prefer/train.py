"""Preference tuning on TRL's ``DPOTrainer`` / ``KTOTrainer`` / experimental ``ORPOTrainer`` (trl 1.16), on the SFT
path's pieces.

- **The loss**: TRL's. DPO's ``sigmoid`` loss is ``-log σ(β ((log π(c) − log π_ref(c)) − (log π(r) − log π_ref(r))))``
  over the summed log-probabilities of the chosen (c) and rejected (r) completions (:func:`dpo_loss` computes it
  from the four numbers; a test checks TRL's against it). TRL scores only the completion tokens, through its fused
  LM head, and the prompt as its chat template renders it.
- **ORPO** needs no reference: its loss is the chosen completion's negative log-likelihood plus ``β`` times the
  log-sigmoid of the log odds ratio of chosen over rejected (TRL's experimental trainer; ``precompute_ref_log_probs``
  does not apply).
- **The reference** (DPO, KTO): with LoRA / QLoRA, the same model with its adapter disabled (TRL does this when it
  wraps the model from ``peft_config`` and no ``ref_model`` is given), so no second copy is held; with full
  fine-tuning, a frozen copy that TRL makes. ``precompute_ref_log_probs`` scores the reference once before
  training (less memory during training, one pass more before it).
- **The rest is SFT's**: the base and its QLoRA quantization (:func:`azllm.sft.train.prepare_model`), the adapters
  (:func:`azllm.sft.train.lora_config`), the Trainer's arguments (:func:`azllm.loop.training_arguments`), azllm's
  callbacks (SIGTERM stop with a complete checkpoint, non-finite checks, throughput, progress), resume from the
  newest complete checkpoint, and the final model saved with its tokenizer.
- **Held-out judgement** (:func:`preference_accuracy`): on pairs never trained on, the share whose implicit reward
  margin ``β ((log π(c) − log π_ref(c)) − (log π(r) − log π_ref(r)))`` is positive, with its binomial standard
  error, and the mean margin with its standard error. Chance is 0.5.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..callbacks import StopOnSignalCallback, ThroughputCallback
from ..lifecycle import RunParts, RunResult, finish_trainer, labelled_positions_only, run_trainer
from ..loop import LoopSpec, training_arguments

__all__ = [
    "PREFERENCE_METHODS",
    "PreferenceSpec",
    "dpo_loss",
    "build_preference_trainer",
    "run_preference",
    "completion_logprobs",
    "preference_accuracy",
]

PREFERENCE_METHODS = ("dpo", "kto", "orpo")


@dataclass(frozen=True)
class PreferenceSpec(LoopSpec):
    """The preference loop's arguments: :class:`azllm.loop.LoopSpec` and its own, named as the ``preference``
    params keys. No defaults: a default lives in the config alone."""

    method: str
    beta: float
    loss_type: str
    sft_weight: float
    max_length: int
    precompute_ref_log_probs: bool


def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta: float):
    """DPO's sigmoid loss of each pair from its four summed log-probabilities.

    >>> round(float(dpo_loss(torch.tensor(-1.0), torch.tensor(-3.0), torch.tensor(-2.0), torch.tensor(-2.0), 0.5)), 4)
    0.3133
    """
    margin = beta * ((policy_chosen - ref_chosen) - (policy_rejected - ref_rejected))
    return -torch.nn.functional.logsigmoid(margin)


def _dataset(pairs: list[dict], method: str):
    from datasets import Dataset

    if method == "kto":
        rows = [{"prompt": p["prompt"], "completion": p["completion"], "label": p["label"]} for p in pairs]
    else:
        rows = [{"prompt": p["prompt"], "chosen": p["chosen"], "rejected": p["rejected"]} for p in pairs]
    return Dataset.from_list(rows)


def build_preference_trainer(
    model,
    tokenizer,
    spec: PreferenceSpec,
    *,
    train_pairs: list[dict],
    eval_pairs: list[dict],
    output_dir: str | os.PathLike,
    peft_config=None,
    ref_model=None,
    callbacks=(),
    progress: bool = True,
):
    """TRL's ``DPOTrainer`` (``spec.method == "dpo"``), ``KTOTrainer`` (``"kto"``) or experimental
    ``ORPOTrainer`` (``"orpo"``, no reference) with azllm's callbacks;
    returns ``(trainer, parts)`` (:class:`azllm.lifecycle.RunParts`)."""
    if spec.method not in PREFERENCE_METHODS:
        raise ValueError(f"preference.method must be one of {PREFERENCE_METHODS}, got {spec.method!r}")
    reference = {"ref_model": ref_model}
    if spec.method == "dpo":
        from trl import DPOConfig as Config
        from trl import DPOTrainer as Trainer

        own = {"loss_type": [spec.loss_type], "precompute_ref_log_probs": spec.precompute_ref_log_probs}
        if spec.sft_weight:  # RPO: DPO's loss plus the chosen answers' cross-entropy
            own |= {"loss_type": [spec.loss_type, "sft"], "loss_weights": [1.0, spec.sft_weight]}
    elif spec.method == "kto":
        from trl import KTOConfig as Config
        from trl import KTOTrainer as Trainer

        own = {"precompute_ref_log_probs": spec.precompute_ref_log_probs}
    else:
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # chosen knowingly: the module docstring says so
        from trl.experimental.orpo import ORPOConfig as Config
        from trl.experimental.orpo import ORPOTrainer as Trainer

        own, reference = {}, {}
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    args = training_arguments(
        Config,
        out,
        spec,
        world=world,
        n_params=sum(p.numel() for p in model.parameters()),
        eval_on_start=False,
        beta=spec.beta,
        max_length=spec.max_length,
        **own,
    )
    stop = StopOnSignalCallback()
    throughput = ThroughputCallback(spec.batch_size * spec.grad_accum * spec.max_length * world, spec.untimed_steps)
    trainer = Trainer(
        model=model,
        **reference,
        args=args,
        processing_class=tokenizer,
        peft_config=peft_config,
        train_dataset=_dataset(train_pairs, spec.method),
        eval_dataset=_dataset(eval_pairs, spec.method) if eval_pairs else None,
        callbacks=[stop, throughput, *callbacks],
    )
    return trainer, RunParts(finish_trainer(trainer, out, spec.grad_accum, progress), throughput, stop)


def run_preference(
    model,
    tokenizer,
    spec: PreferenceSpec,
    *,
    train_pairs: list[dict],
    eval_pairs: list[dict],
    output_dir: str | os.PathLike,
    key: str,
    peft_config=None,
    ref_model=None,
    info: dict | None = None,
    callbacks=(),
    progress: bool = True,
) -> RunResult:
    """One preference run through :func:`azllm.lifecycle.run_trainer`: train (resuming from the newest complete
    checkpoint of ``key``), evaluate the held-out pairs, save the final model (the adapter for LoRA) with its
    tokenizer in ``output_dir/final`` and ``results.json``.

    Returns ``{"key", "output_dir", "final_dir", "steps", "seconds", "resumed_from", "curves", "eval", "throughput",
    "spec", **info}`` plus ``model`` and ``trainer`` (not in the JSON); ``{"interrupted", "checkpoint", ...}`` when a
    signal stopped it."""
    out = Path(output_dir)
    trainer, parts = build_preference_trainer(
        model,
        tokenizer,
        spec,
        train_pairs=train_pairs,
        eval_pairs=eval_pairs,
        output_dir=out,
        peft_config=peft_config,
        ref_model=ref_model,
        callbacks=callbacks,
        progress=progress,
    )

    def evaluate(trainer, resumed_from) -> dict:
        metrics = trainer.evaluate() if eval_pairs else {}
        return {
            "eval": {k: v for k, v in metrics.items() if isinstance(v, (int, float))},
            "spec": {**asdict(spec), "report_to": list(spec.report_to)},
            **(info or {}),
        }

    return run_trainer(
        trainer,
        parts,
        output_dir=out,
        key=key,
        resume=spec.resume,
        meta={"key": key, "method": spec.method},
        meta_file="azllm_preference.json",
        evaluate=evaluate,
        tokenizer=tokenizer,
        one_set=True,
        inside=labelled_positions_only,
    )


def _prompt_completion_ids(tokenizer, prompt: list[dict], completion: list[dict]) -> tuple[list[int], list[int]]:
    """The prompt and completion ids as TRL's DPO tokenizes a conversational pair: the prompt with the generation
    prompt, the whole conversation, and the completion from where the two diverge."""
    p = list(tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=False))
    full = list(tokenizer.apply_chat_template(prompt + completion, tokenize=True, return_dict=False))
    n = next((i for i, (a, b) in enumerate(zip(p, full)) if a != b), min(len(p), len(full)))
    return full[:n], full[n:]


@torch.no_grad()
def completion_logprobs(
    model, tokenizer, prompts: list[list[dict]], completions: list[list[dict]], max_length: int | None = None
) -> list[float]:
    """The summed log-probability of each completion given its prompt, tokenized as TRL's DPO does (and, like
    it, cut to the first ``max_length`` tokens of prompt + completion), one sequence at a time, in eval mode."""
    was = model.training
    model.eval()
    out = []
    try:
        for prompt, completion in zip(prompts, completions):
            p, c = _prompt_completion_ids(tokenizer, prompt, completion)
            if max_length is not None:
                c = c[: max(0, max_length - len(p))]
            ids = torch.tensor([p + c], device=model.device)
            logits = model(input_ids=ids, use_cache=False).logits[0, len(p) - 1 : -1].float()
            out.append(float(torch.log_softmax(logits, -1).gather(-1, ids[0, len(p) :, None]).sum()))
    finally:
        model.train(was)
    return out


def preference_accuracy(
    model, tokenizer, pairs: list[dict], *, beta: float, ref_model=None, max_length: int | None = None
) -> dict:
    """Held-out preference accuracy (module docstring): ``{"n", "accuracy", "accuracy_se", "margin",
    "margin_se", "chance": 0.5, "margins"}``. The reference is ``ref_model``, else ``model`` with its adapter
    disabled (a peft model), else ``model`` itself (then every margin is 0: the SFT model judged against itself).
    ``max_length``: the run's, so that the completions are scored as far as training saw them."""
    prompts = [p["prompt"] for p in pairs]

    def logps(m, key: str) -> list[float]:
        return completion_logprobs(m, tokenizer, prompts, [p[key] for p in pairs], max_length)

    chosen, rejected = logps(model, "chosen"), logps(model, "rejected")
    if ref_model is not None:
        ref_c, ref_r = logps(ref_model, "chosen"), logps(ref_model, "rejected")
    elif hasattr(model, "disable_adapter"):
        with model.disable_adapter():
            ref_c, ref_r = logps(model, "chosen"), logps(model, "rejected")
    else:
        ref_c, ref_r = chosen, rejected
    margins = [beta * ((c - rc) - (r - rr)) for c, r, rc, rr in zip(chosen, rejected, ref_c, ref_r)]
    n = len(margins)
    if n == 0:
        raise ValueError("preference_accuracy needs at least one held-out pair")
    acc = sum(m > 0 for m in margins) / n
    mean = sum(margins) / n
    var = sum((m - mean) ** 2 for m in margins) / (n - 1) if n > 1 else float("nan")
    return {
        "n": n,
        "accuracy": acc,
        "accuracy_se": math.sqrt(acc * (1 - acc) / n),
        "margin": mean,
        "margin_se": math.sqrt(var / n),
        "chance": 0.5,
        "margins": margins,
    }
