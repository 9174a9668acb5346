"""Two CPU processes under torchrun (gloo DDP) train the tiny model: different data per rank, identical weights."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from train_helpers import data  # noqa: F401

REPO = Path(__file__).resolve().parent.parent


def test_two_process_torchrun_ddp(data, tmp_path):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    assert torchrun, "torch installs torchrun next to this Python"
    rec = tmp_path / "rec"
    spec = tmp_path / "spec.json"
    steps = 6
    spec.write_text(json.dumps({"art": str(data["art"]), "output_dir": str(tmp_path / "run"), "record": str(rec),
                                "resume": False,
                                "train": {"max_steps": steps, "eval_steps": 3, "save_steps": 3}}))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    import socket

    with socket.socket() as sock:  # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    p = subprocess.run([torchrun, "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
                        str(REPO / "tests" / "train_entry.py"), str(spec)], env=env, capture_output=True, text=True,
                       timeout=600, cwd=str(tmp_path))
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-4000:])
    r0, r1 = (json.loads((rec / f"rank{k}.json").read_text()) for k in (0, 1))
    assert r0["world_size"] == r1["world_size"] == 2 and r0["steps"] == r1["steps"] == steps
    bs = 4
    assert len(r0["windows"]) == len(r1["windows"]) == steps * bs  # each rank: its own batch every step
    w0, w1 = set(map(tuple, r0["windows"])), set(map(tuple, r1["windows"]))
    assert len(w0) == steps * bs and not (w0 & w1), "ranks read overlapping windows"
    assert r0["digest"] == r1["digest"]
    a, b = (torch.load(rec / f"weights-rank{k}.pt", weights_only=True) for k in (0, 1))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    from azllm.model import build_model, model_config

    from train_helpers import tiny_params

    P = tiny_params(data["art"])
    init = build_model(model_config(P.model.preset, data["tokenizer"].vocab_size, **P.model.config), seed=P.seed)
    moved = [k for k, v in init.named_parameters() if not torch.equal(v.detach(), a[k])]
    assert len(moved) == len(a)  # every weight was trained (same on both ranks)
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["throughput"]["tokens_per_step"] == 2 * bs * 32
