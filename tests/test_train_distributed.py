"""Two CPU processes under torchrun train the tiny model: ``torchrun -m azllm train`` with gloo DDP (the data prepared
once, by rank 0; different data per rank, identical weights), a SIGTERM to one rank only (both stop on one step,
the restart ends as the uninterrupted run) and FSDP2 full shard (the same losses and weights as one process with
the two ranks' batch).

``python tests/test_train_distributed.py SPEC`` (or under torchrun) is the entry the FSDP test starts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import torch
from train_helpers import TINY_TRAIN, data  # noqa: F401

REPO = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as sock:  # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _torchrun(
    nproc: int,
    script: Path | str,
    spec: Path,
    cwd: Path,
    timeout: float = 600,
    args: tuple = (),
    env: dict | None = None,
) -> subprocess.CompletedProcess:
    """torchrun of ``script`` (``"azllm train"``: ``-m azllm train``) with ``spec`` and ``args``, in its own process
    group; past ``timeout`` (a hung job) the launcher and its workers are killed
    (torchrun starts each worker in a session of its own, so each process group is killed) and the test fails with
    what the processes wrote."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    assert torchrun, "torch installs torchrun next to this Python"
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    p = subprocess.Popen(
        [
            torchrun,
            "--nproc-per-node",
            str(nproc),
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(_free_port()),
            *(["-m", "azllm", "train"] if script == "azllm train" else [str(script)]),
            str(spec),
            *args,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(cwd),
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException as e:
        workers = [c.pid for c in psutil.Process(p.pid).children(recursive=True)] if p.poll() is None else []
        for pid in (p.pid, *workers):  # the workers listed before they lose their parent
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out, err = p.communicate()
        if not isinstance(e, subprocess.TimeoutExpired):
            raise
        pytest.fail(
            f"torchrun was still running after {timeout:.0f} s (killed with its workers):\n{out[-2000:]}\n{err[-4000:]}"
        )
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _said(p: subprocess.CompletedProcess) -> str:
    """What a failed torchrun wrote, whole lines (a tuple in an assertion message is cut short by pytest)."""
    return f"exit {p.returncode}\n--- stdout\n{p.stdout[-3000:]}\n--- stderr\n{p.stderr[-8000:]}"


# The user's command, ``torchrun --nproc-per-node 2 -m azllm train PARAMS``, three times on one artifacts folder:
# uninterrupted on fresh artifacts (the DDP test, and the reference of the SIGTERM test), then interrupted by a
# SIGTERM to one rank, then restarted. tests/rank_hook adds tests/train_entry.py's callbacks and records to each rank.
DDP_TRAIN = {
    **TINY_TRAIN,
    "max_steps": 12,
    "logging_steps": 4,
    "eval_steps": 6,
    "save_steps": 4,
    "save_total_limit": 3,
    "report_to": [],
}
HOOK = os.pathsep.join(str(REPO / "tests" / d) for d in ("rank_hook", ""))


def _azllm_train(tmp: Path, art: Path, params: Path, out: Path, name: str, **spec) -> subprocess.CompletedProcess:
    """``torchrun --nproc-per-node 2 -m azllm train PARAMS --output-dir OUT`` with ``art`` as the artifacts folder;
    each rank records into ``tmp/<name>-rec`` (and takes ``spec``'s SIGTERM)."""
    rec = tmp / f"{name}-rec"
    (tmp / f"{name}.json").write_text(json.dumps({"record": str(rec), **spec}))
    env = {
        "AZLLM_ARTIFACTS": str(art),
        "TQDM_DISABLE": "1",
        "PYTHONPATH": HOOK,
        "AZLLM_TEST_RANK_SPEC": str(tmp / f"{name}.json"),
    }
    return _torchrun(2, "azllm train", params, REPO, timeout=300, args=("--output-dir", str(out)), env=env)


def _preparations(art: Path) -> list[dict]:
    from azllm.recipes.tokens import PREPARE_LOG

    return [json.loads(x) for x in (art / "ddp" / "tokens" / PREPARE_LOG).read_text().splitlines()]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    """``(tmp, artifacts, params file, run folder, record folder)`` of the first, uninterrupted launch, on fresh
    artifacts."""
    from train_helpers import tiny_params_file

    tmp = tmp_path_factory.mktemp("ddp")
    params, art = tiny_params_file(tmp / "p.yaml", "ddp", DDP_TRAIN), tmp / "art"
    p = _azllm_train(tmp, art, params, tmp / "run", "full")
    assert p.returncode == 0, _said(p)
    return tmp, art, params, tmp / "run", tmp / "full-rec"


@pytest.mark.slow  # one corpus stage, one tokenizer, two 12-step ranks (~40 s on 2 cores)
def test_two_process_torchrun_ddp_prepares_the_data_once(ddp_run):
    """On fresh artifacts rank 0 cleans, mixes, trains the tokenizer and encodes while rank 1 waits for its marker
    (before, every rank prepared everything); then both train on different data (disjoint windows, each its own
    batch every step) to identical weights, every one of them trained."""
    from azllm.model import build_model, model_config
    from azllm.recipes import load
    from azllm.recipes.tokens import PREPARED

    tmp, art, params, run, rec = ddp_run
    log = _preparations(art)
    assert [e["rank"] for e in log] == [0], log
    marker = json.loads((art / "ddp" / "tokens" / PREPARED).read_text())
    assert marker["prepared_by"] == log[0] and marker["tokenizer"] == "tokenizer"
    steps, bs = DDP_TRAIN["max_steps"], DDP_TRAIN["batch_size"]
    r0, r1 = (json.loads((rec / f"rank{k}.json").read_text()) for k in (0, 1))
    assert r0["world_size"] == r1["world_size"] == 2 and r0["steps"] == r1["steps"] == steps
    assert len(r0["windows"]) == len(r1["windows"]) == steps * bs  # each rank: its own batch every step
    w0, w1 = set(map(tuple, r0["windows"])), set(map(tuple, r1["windows"]))
    assert len(w0) == steps * bs and not (w0 & w1), "ranks read overlapping windows"
    assert r0["digest"] == r1["digest"]
    a, b = (torch.load(rec / f"weights-rank{k}.pt", weights_only=True) for k in (0, 1))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    P = load(params)
    vocab = a["model.embed_tokens.weight"].shape[0]
    init = build_model(model_config(P.model.preset, vocab, **P.model.config), seed=P.seed)
    moved = [k for k, v in init.named_parameters() if not torch.equal(v.detach(), a[k])]
    assert len(moved) == len(a)  # every weight was trained (same on both ranks)
    results = json.loads((run / "results.json").read_text())
    assert results["throughput"]["tokens_per_step"] == 2 * bs * DDP_TRAIN["block_size"]


@pytest.mark.slow  # two two-process launches (~25 s each on 2 idle cores), after the one of ddp_run
def test_sigterm_to_one_rank_stops_both_on_the_same_step_and_the_restart_ends_as_uninterrupted(ddp_run):
    """A SIGTERM that reaches one rank only (rank 1, during step 5; rank 0 never gets one) with the stop flag read
    at logging steps (every 4), evaluations (6, 12) and checkpoints (every 4): both ranks stop after step 6, the next
    such step, write one complete checkpoint-6 and exit 0 (the launcher too), within the time limit (before the fix
    rank 1 saved and left after step 5 while rank 0 trained on: the job hung or crashed). The restarted job resumes
    from checkpoint-6 and ends with the weights of the uninterrupted launch. Neither launch prepares anything: the
    artifacts are ddp_run's."""
    from azllm.callbacks import latest_checkpoint

    tmp, art, params, _, full_rec = ddp_run
    run = tmp / "term-run"
    for name, spec in (("term", {"term_at_step": 5, "term_rank": 1}), ("resumed", {})):
        p = _azllm_train(tmp, art, params, run, name, **spec)
        assert p.returncode == 0, f"{name}: {_said(p)}"
        assert [e["rank"] for e in _preparations(art)] == [0]  # still the one preparation of the first launch
        if name == "term":
            rec = tmp / f"{name}-rec"  # each rank's own file (their stdout lines can land on one line)
            stopped = [json.loads((rec / f"interrupted-rank{k}.json").read_text()) for k in (0, 1)]
            ck = str(run / "checkpoint-6")
            assert stopped == [{"interrupted": "SIGTERM", "steps": 6, "checkpoint": ck, "rank": k} for k in (0, 1)]
            assert latest_checkpoint(run).name == "checkpoint-6"
            assert not (run / "results.json").exists()
    resumed = json.loads((run / "results.json").read_text())
    assert resumed["resumed_from"].endswith("checkpoint-6") and resumed["steps"] == 12
    a, b = (torch.load(rec / "weights-rank0.pt", weights_only=True) for rec in (full_rec, tmp / "resumed-rec"))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-5) for k in a), max(
        (a[k] - b[k]).abs().max().item() for k in a
    )
    assert (
        json.loads((tmp / "resumed-rec" / "rank0.json").read_text())["digest"]
        == json.loads((tmp / "resumed-rec" / "rank1.json").read_text())["digest"]
    )


@pytest.mark.slow
def test_two_process_fsdp_full_shard_matches_one_process(data, tmp_path, monkeypatch):
    """FSDP2 ``fully_shard`` of every decoder layer and the root (reshard after forward: weights, gradients and
    AdamW states split over 2 gloo ranks) through ``train.fsdp``, against one process training the same 8 windows
    per step: the same loss at every step, validation loss and final weights, up to float summation order (the
    DDP test above asks identical weights of its ranks; across a different reduction order 1e-5 on losses, 1e-6 on
    weights). Checkpoints (at steps 3 and 6) and the final model (gathered by both ranks, written by rank 0) are
    written under FSDP too. The 16 evaluation windows split evenly over the ranks (with an uneven split the Trainer's
    distributed evaluation pads the last batch and the loss moved by 0.004 here, with or without FSDP). The one
    process is this one (the same recipe call as :func:`_entry`'s, without a launcher)."""
    from safetensors.torch import load_file
    from train_helpers import tiny_params

    from azllm.recipes.tokens import prepare_data
    from azllm.recipes.train import train_model

    steps, over = 6, {"max_steps": 6, "eval_steps": 3, "save_steps": 3, "logging_steps": 1, "eval_max_tokens": 512}
    spec = tmp_path / "fsdp.json"
    spec.write_text(
        json.dumps(
            {
                "art": str(data["art"]),
                "output_dir": str(tmp_path / "fsdp"),
                "train": {**over, "batch_size": 4, "fsdp": True},
                "record": str(tmp_path / "fsdp-rec"),
            }
        )
    )
    p = _torchrun(2, Path(__file__), spec, tmp_path)
    assert p.returncode == 0, _said(p)
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(data["art"]))
    P = tiny_params(data["art"], **over, batch_size=8)
    train_model(P, prepare_data(P, progress=False), output_dir=tmp_path / "one", progress=False, resume=False)
    runs = {name: json.loads((tmp_path / name / "results.json").read_text()) for name in ("fsdp", "one")}
    f, o = runs["fsdp"], runs["one"]
    recs = [json.loads((tmp_path / "fsdp-rec" / f"rank{k}.json").read_text()) for k in (0, 1)]
    assert all(r["fsdp"] and r["fsdp2"] and r["world_size"] == 2 for r in recs), recs
    assert all(
        r["sharded"].get("LlamaDecoderLayer") == 2 and r["sharded"].get("LlamaForCausalLM") == 1 for r in recs
    ), recs  # both decoder layers and the root (accelerate adds embedding, norm, head)
    assert f["fsdp"] and not o["fsdp"] and f["steps"] == o["steps"] == steps
    assert f["throughput"]["tokens_per_step"] == o["throughput"]["tokens_per_step"] == 8 * 32
    lf, lo = ([h["loss"] for h in r["curves"]["train"]] for r in (f, o))
    assert len(lf) == len(lo) == steps and lf[-1] < lf[0]
    assert lf == pytest.approx(lo, abs=1e-5), (lf, lo)  # measured: 1.4e-6
    assert f["final"]["val"]["loss"] == pytest.approx(o["final"]["val"]["loss"], abs=1e-5)
    wf, wo = (load_file(str(tmp_path / n / "final" / "model.safetensors")) for n in ("fsdp", "one"))
    head = wf.pop("lm_head.weight", None)  # the gathered state dict keeps the tied head as a copy
    assert head is None or torch.equal(head, wf["model.embed_tokens.weight"])
    assert wf.keys() == wo.keys()
    assert all(torch.allclose(wf[k], wo[k], rtol=0, atol=1e-6) for k in wf), max(  # measured: 6e-8
        (wf[k] - wo[k]).abs().max().item() for k in wf
    )
    assert (tmp_path / "fsdp" / "checkpoint-6" / "azllm_complete.json").is_file()


def _accelerate_fsdp_on_cpu() -> None:
    """accelerate 1.15 makes a launch FSDP only when it is a GPU-type launch: ``AcceleratorState.__init__``
    (accelerate/state.py) sets ``DistributedType.FSDP`` for MULTI_GPU, MULTI_NPU, MULTI_XPU & co. when an FSDP
    plugin is given, while MULTI_CPU stays plain data parallel, so the Trainer runs ``train.fsdp`` as DDP on CPU
    (the run warns). FSDP2's ``fully_shard`` itself works on CPU with gloo: this test entry lets MULTI_CPU become FSDP
    the same way, so that everything after it (wrapping, sharded steps, checkpoints, the final gather) is the code a
    GPU launch runs."""
    import accelerate.state as st
    from accelerate.utils import DistributedType

    init = st.AcceleratorState.__init__

    def patched(self, *args, fsdp_plugin=None, **kwargs):
        init(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)  # every AcceleratorState() re-copies PartialState's type
        plugin = fsdp_plugin or self.__dict__.get("fsdp_plugin")
        if plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
            self.distributed_type, self.fsdp_plugin = DistributedType.FSDP, plugin

    st.AcceleratorState.__init__ = patched


def _entry(spec_path: str) -> None:
    """One run of the spec (``art``, ``output_dir``, ``train`` overrides, ``record``): each rank writes whether
    the Trainer ran FSDP2 and which modules ``fully_shard`` wrapped."""
    import warnings
    from collections import Counter

    warnings.simplefilter("ignore")
    spec = json.loads(Path(spec_path).read_text())
    if spec["train"].get("fsdp"):
        _accelerate_fsdp_on_cpu()
    os.environ["AZLLM_ARTIFACTS"] = spec["art"]
    from torch.distributed.fsdp import FSDPModule
    from train_helpers import tiny_params

    from azllm.recipes.tokens import prepare_data
    from azllm.recipes.train import train_model as train

    P = tiny_params(Path(spec["art"]), **spec["train"])
    r = train(P, prepare_data(P, progress=False), output_dir=spec["output_dir"], progress=False, resume=False)
    t = r["trainer"]
    sharded = Counter(
        type(m).__name__.removeprefix("FSDP") for m in t.model_wrapped.modules() if isinstance(m, FSDPModule)
    )
    out = Path(spec["record"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{os.environ.get('RANK', '0')}.json").write_text(
        json.dumps(
            {
                "fsdp": t.is_fsdp_enabled,
                "fsdp2": bool(t.is_fsdp_enabled and t.accelerator.is_fsdp2),
                "sharded": dict(sharded),
                "world_size": r["world_size"],
            }
        )
    )


if __name__ == "__main__":
    from azllm.lifecycle import end_distributed

    try:
        _entry(sys.argv[1])
    finally:
        end_distributed()
