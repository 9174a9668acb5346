"""What azllm's preference path costs on top of TRL: :func:`azllm.prefer.train.run_preference` (azllm's model
preparation, the SIGTERM, safety, throughput and progress callbacks, resume, the final save) side by side with a
bare TRL ``DPOTrainer`` on the same model, tokenizer, pairs, ``DPOConfig`` values and ``LoraConfig``.

``azllm bench prefer PARAMS [--rounds N] [--steps N]`` (:func:`azllm.recipes.prefer.preference_benchmark`).
Decisions, as in :mod:`azllm.bench.sft`:

- **The same work**: both paths load the same base (rows for the template's tokens added), the same tokenizer and
  template, the same LoRA adapters from the same seed and the same pairs in the same order (the Trainer's seeded
  sampler); the bare path is what a user writes from TRL's documentation (``DPOTrainer(model, args=DPOConfig(...),
  train_dataset=..., processing_class=..., peft_config=...)``) with the DPOConfig values azllm sets.
- **Tokens/s per real token**: the step time is the interval from one optimizer step's end to the next after
  ``untimed_steps`` (one timer callback in both paths); the tokens of a step are the pairs per step times the mean
  real tokens of a pair (prompt + chosen and prompt + rejected as the chat template renders them, each cut at
  ``max_length``; no padding), the same for both paths.
- **Memory**: every path of every round runs in a fresh process (:func:`azllm.bench.process.run_fresh`), so its
  peak RSS is its own. ``recipe_precomputed`` is azllm's path with ``precompute_ref_log_probs`` on (the reference
  scored once before training): its peak RSS beside the others, and its step time, which then holds no reference
  forward pass.
- **Rotating order**: the order of the paths rotates every round; medians over rounds, the ratio of the medians
  (recipe / bare) and the per-round ratios.
"""

from __future__ import annotations

import json
import resource
import statistics
import tempfile
from pathlib import Path

from ..utils import progress
from .process import ok_or_raise, others_warning, rotation, run_fresh, same_losses
from .sft import StepTimer

__all__ = ["PATHS", "pair_tokens", "measure_preference", "compare_preference"]

PATHS = ("bare", "recipe", "recipe_precomputed")


def pair_tokens(tokenizer, pairs: list[dict], max_length: int) -> float:
    """Mean real tokens of a pair: prompt + chosen and prompt + rejected, as the chat template renders them, each cut
    at ``max_length``."""

    def n(messages):
        return min(len(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False)), max_length)

    return statistics.fmean(n(p["prompt"] + p["chosen"]) + n(p["prompt"] + p["rejected"]) for p in pairs)


def _setup(job: dict):
    from transformers import AutoTokenizer

    from ..prefer.train import PreferenceSpec
    from ..sft.template import prepare_tokenizer
    from ..sft.train import lora_config, prepare_model
    from ..utils import seed_everything

    seed_everything(job["spec"]["seed"])
    tok = AutoTokenizer.from_pretrained(job["base"])
    info = prepare_tokenizer(tok, template="auto", name=job["base"])
    model, _ = prepare_model(job["base"], method=job["method"], new_token_ids=info["added_tokens"])
    peft = lora_config(model, new_token_ids=info["added_tokens"], **job["lora"]) if job["method"] != "full" else None
    spec = PreferenceSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in job["spec"].items()})
    return tok, model, peft, spec


def _bare(job: dict, out: Path, timer: StepTimer, pairs: list[dict]):
    """A bare TRL run: DPOTrainer with the DPOConfig values azllm sets, TRL's own callbacks otherwise."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    from ..lifecycle import expose_head_bias
    from ..loop import training_arguments

    tok, model, peft, spec = _setup(job)
    args = training_arguments(
        DPOConfig,
        out,
        spec,
        world=1,
        n_params=sum(p.numel() for p in model.parameters()),
        eval_on_start=False,
        beta=spec.beta,
        max_length=spec.max_length,
        precompute_ref_log_probs=spec.precompute_ref_log_probs,
        loss_type=[spec.loss_type],
    )
    keys = ("prompt", "chosen", "rejected")
    trainer = DPOTrainer(
        model=model,
        args=args,
        processing_class=tok,
        peft_config=peft,
        callbacks=[timer],
        train_dataset=Dataset.from_list([{k: p[k] for k in keys} for p in pairs]),
        eval_dataset=Dataset.from_list([{k: p[k] for k in keys} for p in pairs[:2]]),
    )
    expose_head_bias(trainer.model)  # as for SFT: trainable token rows need the LM head's bias served
    trainer.train()
    return trainer.state


def _recipe(job: dict, out: Path, timer: StepTimer, pairs: list[dict]):
    from ..prefer.train import run_preference

    tok, model, peft, spec = _setup(job)
    r = run_preference(
        model, tok, spec, train_pairs=pairs, eval_pairs=pairs[:2], output_dir=out, key="bench", peft_config=peft,
        callbacks=[timer], progress=True,
    )  # fmt: skip
    return r["trainer"].state


def measure_preference(job: dict) -> dict:
    """Fresh-process entry: one path (``job["path"]``: ``bare``, ``recipe`` or ``recipe_precomputed``). ``job``:
    ``base`` (a folder), ``pairs`` (a JSON file of pairs), ``method``, ``lora`` (:func:`azllm.sft.train.lora_config`
    fields), ``spec`` (:class:`azllm.prefer.train.PreferenceSpec` fields), ``threads``, ``workdir``."""
    import torch

    if job.get("threads"):
        torch.set_num_threads(int(job["threads"]))
    pairs = json.loads(Path(job["pairs"]).read_text())
    path = job["path"]
    if path == "recipe_precomputed":
        job = {**job, "spec": {**job["spec"], "precompute_ref_log_probs": True}}
    timer = StepTimer(job["spec"].get("untimed_steps", 2))
    with tempfile.TemporaryDirectory(dir=job.get("workdir")) as td:
        state = (_bare if path == "bare" else _recipe)(job, Path(td) / "run", timer, pairs)
    spec = job["spec"]
    tokens = spec["batch_size"] * spec["grad_accum"] * job["pair_tokens"]
    return {
        "tokens_per_s": tokens * len(timer.times) / sum(timer.times) if timer.times else None,
        "step_s": statistics.median(timer.times) if timer.times else None,
        "steps": state.global_step,
        "timed_steps": len(timer.times),
        "losses": [h["loss"] for h in state.log_history if "loss" in h],
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        "threads": torch.get_num_threads(),
    }


def compare_preference(
    *,
    base: str,
    pairs: list[dict],
    pair_tokens: float,
    method: str = "lora",
    lora: dict | None = None,
    spec: dict,
    rounds: int = 3,
    threads: int = 1,
    timeout_s: float = 1800,
    show_progress: bool = True,
    paths: tuple[str, ...] = PATHS,
) -> dict:
    """Every path of :data:`PATHS` in every round, each in a fresh process, the order rotated every round. Returns
    ``{"rows": [{"round", "order", <path>, "<path>_step_ms", "<path>_peak_gb", "ratio"}], <path> (median tokens/s),
    "peak_rss_gb" (per path, the largest), "ratio" (of the medians, recipe / bare), "ratio_min", "ratio_max",
    "same_losses" (bare and recipe), "pair_tokens", "others_cores_max", "load_warning"}``."""
    spec = {"eval_steps": 10**6, "logging_steps": 1, "resume": False, **spec}
    rows, compared, timed = [], [], []
    bar = progress(total=rounds * len(paths), desc="preference overhead", disable=not show_progress)
    with tempfile.TemporaryDirectory(prefix="azllm-prefer-bench-") as work:
        pair_file = Path(work) / "pairs.json"
        pair_file.write_text(json.dumps(pairs, ensure_ascii=False))
        for k in range(rounds):
            order = rotation(paths, k)
            row: dict = {"round": k + 1, "order": " then ".join(order)}
            losses = {}
            for path in order:
                job = {
                    "base": str(base), "pairs": str(pair_file), "pair_tokens": pair_tokens, "method": method,
                    "lora": dict(lora or {}), "spec": spec, "threads": threads, "workdir": work, "path": path,
                }  # fmt: skip
                r = ok_or_raise(
                    run_fresh("azllm.bench.prefer:measure_preference", job, timeout_s=timeout_s),
                    f"round {k + 1} {path}",
                )
                timed.append(r)
                row.update({path: r["tokens_per_s"], f"{path}_step_ms": 1000 * r["step_s"]})
                row[f"{path}_peak_gb"] = r["peak_rss_gb"]
                losses[path] = r["losses"]
                bar.update(1)
            if "bare" in losses and "recipe" in losses:
                compared.append(same_losses(losses["bare"], losses["recipe"]))
                row["ratio"] = row["recipe"] / row["bare"]
            rows.append(row)
    bar.close()
    med = {p: statistics.median(r[p] for r in rows) for p in paths}
    out = {
        "rows": rows,
        **med,
        "peak_rss_gb": {p: max(r[f"{p}_peak_gb"] for r in rows) for p in paths},
        "same_losses": all(compared) if compared else None,
        "pair_tokens": pair_tokens,
        "method": method,
        "spec": spec,
        "threads": threads,
        **others_warning(timed),
    }
    if "bare" in med and "recipe" in med:
        ratios = [r["ratio"] for r in rows]
        out.update(ratio=med["recipe"] / med["bare"], ratio_min=min(ratios), ratio_max=max(ratios))
    return out
