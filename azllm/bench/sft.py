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
  serve, :func:`azllm.sft.train.expose_head_bias`). Both compute the same losses (tested), so the ratio is the cost
  of azllm's additions.
- **Tokens/s**: one timer callback in both paths, the interval from one optimizer step's end to the next after
  ``untimed_steps``; tokens are TRL's count of the non-padding training tokens, per step on average. No evaluation
  or checkpoint falls inside the timed steps.
- **Fresh processes, rotating**: every path of every round runs in a fresh process of its own
  (:func:`azllm.bench.process.run_fresh`), so its peak RSS is its own; the order rotates every round; medians over
  rounds, the ratio of the medians and the per-round ratios. ``threads`` torch threads per process (1: see
  ``benchmark.threads``).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from ..utils import progress
from .process import load_warning, ok_or_raise, rotation, run_fresh, same_losses

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

    seed_everything(job["spec"]["seed"])
    tok = AutoTokenizer.from_pretrained(job["base"])
    info = prepare_tokenizer(tok, template=job.get("template", "auto"))
    model, _ = prepare_model(job["base"], method=job["method"], new_token_ids=info["added_tokens"])
    peft = lora_config(model, new_token_ids=info["added_tokens"], **job["lora"]) if job["method"] != "full" else None
    return (
        tok,
        info,
        model,
        peft,
        SftSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in job["spec"].items()}),
    )


def _bare(job: dict, out: Path, timer: StepTimer):
    """A bare TRL run: SFTTrainer with the same SFTConfig values, TRL's own callbacks and defaults otherwise."""
    from datasets import Dataset
    from trl import SFTTrainer

    from ..lifecycle import expose_head_bias
    from ..sft.train import sft_config

    tok, info, model, peft, spec = _setup(job)
    convs = json.loads(Path(job["conversations"]).read_text())
    args = sft_config(out, spec, eval_on_start=True, world=1, n_params=sum(p.numel() for p in model.parameters()))
    trainer = SFTTrainer(
        model=model,
        args=args,
        processing_class=tok,
        peft_config=peft,
        callbacks=[timer],
        train_dataset=Dataset.from_list([{"messages": c["messages"]} for c in convs]),
        eval_dataset=Dataset.from_list([{"messages": c["messages"]} for c in convs[:4]]),
    )
    expose_head_bias(trainer.model)  # without it TRL 1.16 + peft 0.21.2 fail at step 1 with trainable token rows
    trainer.train()
    return trainer.state, int(trainer._total_train_tokens)


def _loop(job: dict, out: Path, timer: StepTimer):
    """A bare PyTorch + PEFT loop over the same conversations: the chat template's assistant mask as labels,
    ``batch_size`` conversations per micro-batch padded to the longest, ``grad_accum`` micro-batches per AdamW step,
    the model's own loss (full logits), bf16 autocast when the run's precision is bf16 (what a user writes by
    hand). Returns ``(steps, real tokens)`` like the other paths."""
    import torch
    from peft import get_peft_model

    from ..loop import batch_tokens, precision_flags

    tok, info, model, peft, spec = _setup(job)
    model = get_peft_model(model, peft) if peft is not None else model
    convs = json.loads(Path(job["conversations"]).read_text())
    rows = []
    for c in convs:
        enc = tok.apply_chat_template(c["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        ids, mask = enc["input_ids"][: spec.max_length], enc["assistant_masks"][: spec.max_length]
        rows.append((ids, [t if m else -100 for t, m in zip(ids, mask)]))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    bf16 = precision_flags(spec.precision, sum(p.numel() for p in model.parameters()), batch_tokens(spec))["bf16"]
    opt = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=spec.lr,
        weight_decay=spec.weight_decay,
        betas=tuple(spec.betas),
    )
    model.train()
    k, tokens = 0, 0
    for step in range(spec.max_steps):
        for _ in range(spec.grad_accum):
            batch = [rows[(k + i) % len(rows)] for i in range(spec.batch_size)]
            k += spec.batch_size
            width = max(len(ids) for ids, _ in batch)
            x = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in batch])
            y = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch])
            att = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in batch])
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = model(input_ids=x, attention_mask=att, labels=y).loss / spec.grad_accum
            loss.backward()
            tokens += int(att.sum())
        opt.step()
        opt.zero_grad(set_to_none=True)
        timer.on_step_end(None, type("S", (), {"global_step": step + 1})(), None)
    return type("State", (), {"global_step": spec.max_steps, "log_history": []})(), tokens


def _recipe(job: dict, out: Path, timer: StepTimer):
    from ..sft.train import run_sft

    tok, info, model, peft, spec = _setup(job)
    convs = json.loads(Path(job["conversations"]).read_text())
    r = run_sft(
        model,
        tok,
        spec,
        train_convs=convs,
        eval_convs=convs[:4],
        output_dir=out,
        key="bench",
        peft_config=peft,
        end_of_turn_id=info["end_of_turn_id"],
        callbacks=[timer],
        progress=True,
    )
    return r["trainer"].state, int(r["throughput"]["train_tokens"])


def measure_sft(job: dict) -> dict:
    """Fresh-process entry: both paths in ``job["order"]`` (``bare``, ``recipe``). ``job``: ``base`` (a folder),
    ``conversations`` (a JSON file of conversations), ``method``, ``lora`` (:func:`azllm.sft.train.lora_config`
    fields), ``spec`` (:class:`azllm.sft.train.SftSpec` fields), ``template``, ``threads``, ``workdir``."""
    import torch

    from ..lifecycle import keep_freed_memory

    if job.get("threads"):
        torch.set_num_threads(int(job["threads"]))
    kept = keep_freed_memory() if not torch.cuda.is_available() else False
    import os
    import resource

    out: dict = {"threads": torch.get_num_threads(), "freed_memory_kept": kept, "load_start": os.getloadavg()[0]}
    for path in job["order"]:
        timer = StepTimer(job["spec"].get("untimed_steps", 3))
        with tempfile.TemporaryDirectory(dir=job.get("workdir")) as td:
            state, tokens = {"bare": _bare, "loop": _loop, "recipe": _recipe}[path](job, Path(td) / "run", timer)
        per_step = tokens / max(state.global_step, 1)
        out[path] = {
            "tokens_per_s": per_step * len(timer.times) / sum(timer.times) if timer.times else None,
            "step_s": statistics.median(timer.times) if timer.times else None,
            "tokens": tokens,
            "steps": state.global_step,
            "timed_steps": len(timer.times),
            "losses": [h["loss"] for h in state.log_history if "loss" in h],
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        }
    out["load_end"] = os.getloadavg()[0]
    return out


def compare_sft(
    *,
    base: str,
    conversations: list[dict],
    method: str = "lora",
    lora: dict | None = None,
    spec: dict | None = None,
    template: str = "auto",
    rounds: int = 3,
    threads: int = 1,
    timeout_s: float = 1800,
    show_progress: bool = True,
    paths: tuple[str, ...] = ("loop", "bare", "recipe"),
) -> dict:
    """The bare PyTorch + PEFT loop (``loop``), a bare ``SFTTrainer`` (``bare``) and azllm's path (``recipe``) side
    by side: every path of every round in a fresh process of its own (so its peak RSS is its own), the order rotated
    every round. Real (non-padding) tokens per second. Returns ``{"rows": [{"round", "order", <path>,
    "<path> step ms", "<path> peak GB", "ratio" (recipe / loop), "ratio_bare" (recipe / bare)}], <path> (median
    tokens/s), "peak_rss_gb" (per path, the largest), "ratio" (of the medians, recipe / loop), "ratio_min",
    "ratio_max", "ratio_bare", "same_losses" (bare and recipe; None when they did not both run), "load_*"}``."""
    spec = {"keep_best": False, "eval_steps": 10**6, "logging_steps": 5, **(spec or {})}
    rows, compared, loads = [], [], []
    bar = progress(total=rounds * len(paths), desc="sft overhead", disable=not show_progress)
    with tempfile.TemporaryDirectory(prefix="azllm-sft-bench-") as work:
        conv_file = Path(work) / "conversations.json"
        conv_file.write_text(json.dumps(conversations, ensure_ascii=False))
        for k in range(rounds):
            order = rotation(paths, k)
            row: dict = {"round": k + 1, "order": " then ".join(order)}
            losses = {}
            for path in order:
                job = {
                    "base": str(base),
                    "conversations": str(conv_file),
                    "method": method,
                    "lora": dict(lora or {}),
                    "spec": spec,
                    "template": template,
                    "threads": threads,
                    "workdir": work,
                    "order": [path],
                }
                r = ok_or_raise(
                    run_fresh("azllm.bench.sft:measure_sft", job, timeout_s=timeout_s), f"round {k + 1} {path}"
                )
                loads += [r["load_start"], r["load_end"]]
                row.update(
                    {
                        path: r[path]["tokens_per_s"],
                        f"{path} step ms": 1000 * r[path]["step_s"],
                        f"{path} peak GB": r[path]["peak_rss_gb"],
                    }
                )
                losses[path] = r[path]["losses"]
                bar.update(1)
            if "bare" in losses and "recipe" in losses:  # azllm's compact LM head sums in another order
                compared.append(same_losses(losses["bare"], losses["recipe"]))
            if "loop" in row and "recipe" in row:
                row["ratio"] = row["recipe"] / row["loop"]
            if "bare" in row and "recipe" in row:
                row["ratio_bare"] = row["recipe"] / row["bare"]
            rows.append(row)
    bar.close()
    med = {p: statistics.median(r[p] for r in rows) for p in paths}
    out = {
        "rows": rows,
        **med,
        "peak_rss_gb": {p: max(r[f"{p} peak GB"] for r in rows) for p in paths},
        "same_losses": all(compared) if compared else None,  # None: bare and recipe never ran in one round
        "method": method,
        "spec": spec,
        "threads": threads,
        **load_warning(loads),
    }
    if "loop" in med and "recipe" in med:
        out.update(
            ratio=med["recipe"] / med["loop"],
            ratio_min=min(r["ratio"] for r in rows),
            ratio_max=max(r["ratio"] for r in rows),
        )
    if "bare" in med and "recipe" in med:
        out["ratio_bare"] = med["recipe"] / med["bare"]
    return out
