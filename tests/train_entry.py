"""Run one tiny training in its own process, for the resume and distributed tests.

``python tests/train_entry.py spec.json`` (or under ``torchrun``). The spec holds ``art`` (artifacts dir of the
shared tiny data), ``train`` (train params overrides), optional ``overrides`` (other params), ``output_dir``,
optional ``kill_at_step`` (SIGKILL this
process at the end of that optimizer step: a crash, no cleanup), optional ``term_at_step`` (this process sends itself
a real SIGTERM as that step begins; with ``term_rank`` only that rank does) and optional ``record`` (a folder where
each rank writes the training windows it read and its final weights). An interrupted run prints one JSON line per
rank and, with ``record``, writes it to ``interrupted-rank<k>.json`` there. :func:`rank_callbacks` and
:func:`write_records` also serve ``tests/rank_hook``, which adds them to a torchrun launch of ``python -m azllm train``.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import warnings
from pathlib import Path

import torch

from azllm.utils import atomic_write_json

warnings.simplefilter("ignore")  # (tests/ is this script's folder, so train_helpers imports as is)


def rank_callbacks(spec: dict, rank: int, seen: list) -> list:
    """The callbacks ``spec`` asks of this rank: ``term_at_step`` (with ``term_rank``), ``kill_at_step`` and, with
    ``record``, one that appends every training window this rank reads to ``seen``."""
    from transformers import TrainerCallback

    callbacks = []
    if spec.get("term_at_step") and spec.get("term_rank", rank) == rank:  # a spot notice arrives during that step
        t = int(spec["term_at_step"])

        class Term(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                if state.global_step == t - 1:
                    os.kill(os.getpid(), signal.SIGTERM)

        callbacks.append(Term())
    if spec.get("kill_at_step"):
        k = int(spec["kill_at_step"])

        class Kill(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                if state.global_step == k:
                    os.kill(os.getpid(), signal.SIGKILL)

        callbacks.append(Kill())
    if spec.get("record"):

        class Record(TrainerCallback):
            def on_train_begin(self, args, state, control, model=None, **kw):
                model.register_forward_pre_hook(
                    lambda m, a, kw_: seen.extend(kw_["input_ids"].tolist()) if m.training else None, with_kwargs=True
                )

        callbacks.append(Record())
    return callbacks


def write_records(spec: dict, rank: int, r: dict, seen: list) -> None:
    """After the run: an interrupted run prints its JSON line (and writes ``interrupted-rank<k>.json`` with
    ``record``); a finished one writes, with ``record``, this rank's windows, weights and their digest."""
    if r.get("interrupted"):
        stopped = {"interrupted": r["interrupted"], "steps": r["steps"], "checkpoint": r["checkpoint"], "rank": rank}
        print(json.dumps(stopped), flush=True)
        if spec.get("record"):  # each rank's own file: the ranks' stdout lines may interleave under torchrun
            out = Path(spec["record"])
            out.mkdir(parents=True, exist_ok=True)
            atomic_write_json(out / f"interrupted-rank{rank}.json", stopped)
        return
    if spec.get("record"):
        out = Path(spec["record"])
        out.mkdir(parents=True, exist_ok=True)
        weights = {n: p.detach().cpu() for n, p in r["model"].named_parameters()}
        digest = hashlib.sha256(b"".join(w.numpy().tobytes() for w in weights.values())).hexdigest()
        torch.save(weights, out / f"weights-rank{rank}.pt")
        (out / f"rank{rank}.json").write_text(
            json.dumps({"windows": seen, "digest": digest, "world_size": r["world_size"], "steps": r["steps"]})
        )


def main(spec_path: str) -> None:
    from train_helpers import tiny_params

    from azllm.recipes.tokens import prepare_data
    from azllm.recipes.train import train_model as train

    spec = json.loads(Path(spec_path).read_text())
    os.environ["AZLLM_ARTIFACTS"] = spec["art"]
    P = tiny_params(Path(spec["art"]), spec.get("overrides"), **spec.get("train", {}))
    d = prepare_data(P, progress=False)  # already encoded by the test: only checks and loads
    rank, seen = int(os.environ.get("RANK", "0")), []
    callbacks = rank_callbacks(spec, rank, seen)
    r = train(P, d, output_dir=spec["output_dir"], callbacks=callbacks, progress=False, resume=spec.get("resume", True))
    write_records(spec, rank, r, seen)


if __name__ == "__main__":
    from azllm.lifecycle import end_distributed

    try:
        main(sys.argv[1])
    finally:
        end_distributed()
