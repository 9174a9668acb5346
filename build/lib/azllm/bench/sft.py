"""What azllm's SFT path costs on top of TRL: :func:`azllm.sft.train.run_sft` (azllm's model preparation, the
SIGTERM, safety, throughput and progress callbacks, the held-out evaluation set) side by side with a bare TRL
``SFTTrainer`` on the same model, tokenizer, conversations, ``SFTConfig`` values and ``LoraConfig``.

``azllm bench sft PARAMS [--rounds N] [--steps N]`` (:func:`azllm.recipes.sft.sft_benchmark`). Decisions, as in
:mod:`azllm.bench.overhead`:

- **The same work**: both paths load the same base (rows for the template's tokens added), the same tokenizer with
  the same template, the same LoRA adapters from the same seed, the same conversations in the same order; the
  bare path is what a user writes from TRL's documentation (``SFTTrainer(model, args=SFTConfig(...),
  train_dataset=..., processing_class=..., peft_config=...)``), with TRL's defaults for everything azllm does not
  set, and one fix it needs to run at all with trainable token rows (the LM-head bias that peft's wrapper does not
  serve, :func:`azllm.sft.train._expose_head_bias`). Both compute the same losses (tested), so the ratio is the cost
  of azllm's additions.
- **Tokens/s**: one timer callback in both paths, the interval from one optimizer step's end to the next after
  ``untimed_steps``; tokens are TRL's count of the non-padding training tokens, per step on average. No evaluation
  or checkpoint falls inside the timed steps.
- **Fresh processes, alternating**: each round is one fresh process (:func:`azllm.bench.process.run_fresh`) that
  runs both paths, in flipped order every round; medians over rounds, the ratio of the medians and the per-round
  ratios. ``threads`` torch threads per process (1: see ``benchmark.threads``).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from ..utils import progress
from .process import ok_or_raise, run_fresh

__all__ = ["StepTimer", "measure_sft", "compare_sft"]


def _callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class StepTimer(_callback_base()):
    """Wall time between consecutive optimizer-step ends after ``untimed_steps`` (both paths use it)."""

    def __init__(self, untimed_steps: int):
        self.untimed, self.times, self._last = int(untimed_steps), [], None

    def on_step_end(self, args, state, control, **kw):
        now = time.perf_counter()
        if self._last is not None and state.global_step > self.untimed:
            self.times.append(now - self._last)
        self._last = now


def _setup(job: dict):
    from transformers import AutoTokenizer

    from ..sft.template import prepare_tokenizer
    from ..sft.train import SftSpec, lora_config, prepare_model
    from ..utils import seed_everything

    seed_everything(job["spec"].get("seed", 1234))
    tok = AutoTokenizer.from_pretrained(job["base"])
    info = prepare_tokenizer(tok, template=job.get("template", "auto"))
    model, _ = prepare_model(job["base"], method=job["method"], new_token_ids=info["added_tokens"])
    peft = lora_config(model, new_token_ids=info["added_tokens"], **job["lora"]) if job["method"] != "full" else None
    return tok, info, model, peft, SftSpec(**job["spec"])


def _bare(job: dict, out: Path, timer: StepTimer):
    """A bare TRL run: SFTTrainer with the same SFTConfig values, TRL's own callbacks and defaults otherwise."""
    from datasets import Dataset
    from trl import SFTTrainer

    from ..sft.train import _expose_head_bias, _sft_config

    tok, info, model, peft, spec = _setup(job)
    convs = json.loads(Path(job["conversations"]).read_text())
    args = _sft_config(out, spec, eval_on_start=True, world=1, n_params=sum(p.numel() for p in model.parameters()))
    trainer = SFTTrainer(model=model, args=args, processing_class=tok, peft_config=peft, callbacks=[timer],
                         train_dataset=Dataset.from_list([{"messages": c["messages"]} for c in convs]),
                         eval_dataset=Dataset.from_list([{"messages": c["messages"]} for c in convs[:4]]))
    _expose_head_bias(trainer.model)  # without it TRL 1.16 + peft 0.21.2 fail at step 1 with trainable token rows
    trainer.train()
    return trainer.state, int(trainer._total_train_tokens)


def _recipe(job: dict, out: Path, timer: StepTimer):
    from ..sft.train import run_sft

    tok, info, model, peft, spec = _setup(job)
    convs = json.loads(Path(job["conversations"]).read_text())
    r = run_sft(model, tok, spec, train_convs=convs, eval_convs=convs[:4], output_dir=out, key="bench",
                peft_config=peft, end_of_turn_id=info["end_of_turn_id"], callbacks=[timer], progress=True)
    return r["trainer"].state, int(r["throughput"]["train_tokens"])


def measure_sft(job: dict) -> dict:
    """Fresh-process entry: both paths in ``job["order"]`` (``bare``, ``recipe``). ``job``: ``base`` (a folder),
    ``conversations`` (a JSON file of conversations), ``method``, ``lora`` (:func:`azllm.sft.train.lora_config`
    fields), ``spec`` (:class:`azllm.sft.train.SftSpec` fields), ``template``, ``threads``, ``workdir``."""
    import torch

    from ..train import keep_freed_memory

    if job.get("threads"):
        torch.set_num_threads(int(job["threads"]))
    kept = keep_freed_memory() if not torch.cuda.is_available() else False
    out: dict = {"threads": torch.get_num_threads(), "freed_memory_kept": kept}
    for path in job["order"]:
        timer = StepTimer(job["spec"].get("untimed_steps", 3))
        with tempfile.TemporaryDirectory(dir=job.get("workdir")) as td:
            state, tokens = (_bare if path == "bare" else _recipe)(job, Path(td) / "run", timer)
        per_step = tokens / max(state.global_step, 1)
        out[path] = {"tokens_per_s": per_step * len(timer.times) / sum(timer.times) if timer.times else None,
                     "step_s": statistics.median(timer.times) if timer.times else None, "tokens": tokens,
                     "steps": state.global_step, "timed_steps": len(timer.times),
                     "losses": [h["loss"] for h in state.log_history if "loss" in h]}
    return out


def compare_sft(*, base: str, conversations: list[dict], method: str = "lora", lora: dict | None = None,
                spec: dict | None = None, template: str = "auto", rounds: int = 3, threads: int = 1,
                timeout_s: float = 900, show_progress: bool = True) -> dict:
    """The bare ``SFTTrainer`` and azllm's path side by side in ``rounds`` fresh processes, the order flipped every
    round. Returns ``{"rows": [{"round", "order", "bare", "recipe", "ratio"}], "bare", "recipe" (median tokens/s),
    "ratio" (of the medians), "ratio_min", "ratio_max", "same_losses"}``."""
    spec = {"keep_best": False, "eval_steps": 10 ** 6, "logging_steps": 5, **(spec or {})}
    rows, same, bar = [], True, progress(total=rounds, desc="sft overhead", disable=not show_progress)
    with tempfile.TemporaryDirectory(prefix="azllm-sft-bench-") as work:
        conv_file = Path(work) / "conversations.json"
        conv_file.write_text(json.dumps(conversations, ensure_ascii=False))
        for k in range(rounds):
            order = ["bare", "recipe"] if k % 2 == 0 else ["recipe", "bare"]
            job = {"base": str(base), "conversations": str(conv_file), "method": method, "lora": dict(lora or {}),
                   "spec": spec, "template": template, "threads": threads, "workdir": work, "order": order}
            r = ok_or_raise(run_fresh("azllm.bench.sft:measure_sft", job, timeout_s=timeout_s), f"round {k + 1}")
            same &= r["bare"]["losses"] == r["recipe"]["losses"]
            rows.append({"round": k + 1, "order": " then ".join(order), "bare": r["bare"]["tokens_per_s"],
                         "recipe": r["recipe"]["tokens_per_s"],
                         "ratio": r["recipe"]["tokens_per_s"] / r["bare"]["tokens_per_s"],
                         "bare step ms": 1000 * r["bare"]["step_s"], "recipe step ms": 1000 * r["recipe"]["step_s"]})
            bar.update(1)
    bar.close()
    bare, recipe = (statistics.median(r[p] for r in rows) for p in ("bare", "recipe"))
    return {"rows": rows, "bare": bare, "recipe": recipe, "ratio": recipe / bare,
            "ratio_min": min(r["ratio"] for r in rows), "ratio_max": max(r["ratio"] for r in rows),
            "same_losses": same, "method": method, "spec": spec, "threads": threads}
