"""The corpus stage end to end (azllm.corpus.stage on datatrove): each step, the manifest and its cache, bad input,
a hub source, a killed run, several processes at once, a run from standard input."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_helpers import slurm_cluster  # noqa: F401
from corpus_helpers import AMENDMENTS, KILL_SCRIPT, PROSE, TURKISH, _clean, _write, cleaned, flores  # noqa: F401

from azllm.corpus import clean_corpus, in_input_order, read_jsonl
from azllm.data import DataError, resolve_source


def test_each_step_removes_what_it_should(cleaned):
    tmp, m = cleaned
    folder = tmp / "out" / m["key"]
    removed = {
        step: [r["text"] for r in read_jsonl(folder / "removed" / step)]
        for step in ("quality", "language", "decontamination", "exact_dedup", "near_dedup")
    }
    assert removed["quality"] == ["FƏSİL 3"]
    assert removed["language"] == [TURKISH]
    assert len(removed["decontamination"]) == 1 and removed["decontamination"][0].startswith("Xəbərə görə")
    assert len(removed["exact_dedup"]) == 1  # PROSE[2] in capitals: same normalized text
    assert len(removed["near_dedup"]) == 2  # two of the three amendment notes
    kept = [r["text"] for r in read_jsonl(folder / "clean")]
    assert (
        sorted(kept) == sorted([AMENDMENTS[0]] + PROSE[:2] + [PROSE[2], PROSE[3]])
        or sum(a in kept for a in AMENDMENTS) == 1
        and all(p in kept for p in PROSE[:2] + PROSE[3:])
    )
    assert [r["metadata"]["order"] for r in in_input_order(folder / "clean")] == sorted(
        r["metadata"]["order"] for r in read_jsonl(folder / "clean")
    )
    t = m["counts"]["by_source"]["total"]
    assert (t["input_docs"], t["kept_docs"]) == (11, 5)
    assert m["counts"]["by_source"]["news"]["language_docs"] == 1
    assert m["counts"]["languages"] == {"az": 9, "tr": 1}  # "FƏSİL 3" left at the quality step


def test_manifest_records_inputs_settings_and_rerun_is_skipped(cleaned, flores):
    tmp, m = cleaned
    folder = tmp / "out" / m["key"]
    on_disk = json.loads((folder / "manifest.json").read_text())
    assert on_disk["inputs"][0]["sha256"] and on_disk["settings"]["decontamination_n"] == 13
    assert on_disk["settings"]["minhash"] == {"n_grams": 5, "num_buckets": 14, "hashes_per_bucket": 8}
    before = (folder / "manifest.json").stat().st_mtime_ns
    again = _clean(tmp / "src", tmp / "out", {"flores": flores})
    assert again == on_disk and (folder / "manifest.json").stat().st_mtime_ns == before
    other = _clean(tmp / "src", tmp / "out", {"flores": flores}, decontamination_n=8)
    assert other["key"] != m["key"]
    assert not list((tmp / "out").glob("*.work"))


def test_a_source_filtered_to_nothing_is_an_error(tmp_path, flores):
    _write(tmp_path / "src", "ok.txt", PROSE)
    _write(tmp_path / "src", "turkish.txt", [TURKISH, "Bugün hava çok güzel ve güneşli, dışarı çıkalım mı?"])
    with pytest.raises(DataError, match=r"source\(s\) \['turkish'\] filtered down to nothing"):
        _clean(tmp_path / "src", tmp_path / "out", {"flores": flores}, tasks=1, workers=1)
    assert not any((p / "manifest.json").exists() for p in (tmp_path / "out").iterdir())


@pytest.mark.parametrize(
    "name,content,match",
    [
        ("bad.parquet", b"PAR1 this is not parquet", r"bad.parquet: not a readable parquet file"),
        ("recs.jsonl", b'{"body": "Salam"}\n', r"recs.jsonl at byte 0: no field 'text'"),
        ("latin1.txt", "Bakı şəhəri\n".encode() + b"caf\xe9 au lait\n", r"latin1.txt: not valid UTF-8"),
    ],
)
def test_bad_input_names_the_file(tmp_path, flores, name, content, match):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / name).write_bytes(content)
    with pytest.raises(DataError, match=match):
        _clean(tmp_path / "src", tmp_path / "out", {"flores": flores}, tasks=1, workers=1)


def test_hub_source_is_downloaded_once_and_cleaned(tmp_path, flores):
    ds = tmp_path / "hub_ds"
    ds.mkdir()
    (ds / "train.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in PROSE))
    r = resolve_source({"hub": str(ds)}, None)
    m = clean_corpus(
        [r], tmp_path / "out", eval_lines={"flores": flores}, languages=["az"], quality={}, tasks=1, workers=1
    )
    assert m["inputs"][0]["fingerprint"] and m["counts"]["by_source"]["total"]["kept_docs"] == 4


def test_a_killed_run_leaves_nothing_taken_as_finished(tmp_path, data_root, flores):
    src = data_root / "data/az/train"
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(src), str(out)], env={**os.environ}, start_new_session=True
    )
    deadline = time.time() + 60
    while time.time() < deadline and not list(out.glob("*.work/removed")):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its worker, forkserver and manager processes
    proc.wait()
    assert list(out.glob("*.work")), "the run was killed before it started writing"
    assert not list(out.glob("*/manifest.json"))
    done = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(src), str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    (finished,) = list(out.glob("*/manifest.json"))
    m = json.loads(finished.read_text())
    assert m["counts"]["by_source"]["total"]["input_docs"] > 1000
    assert not list(out.glob("*.work"))


def test_processes_cleaning_at_once_share_one_result(tmp_path, data_root):
    """Like torchrun ranks of one run: both finish, one cleaned corpus, no work folder left."""
    src, out = data_root / "data/az/train", tmp_path / "out"
    procs = [
        subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(src), str(out)], stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()[-2000:]
    assert len(list(out.glob("*/manifest.json"))) == 1 and not list(out.glob("*.work"))


UNPICKLE_SCRIPT = """
import inspect
from datatrove.pipeline.base import PipelineStep
from datatrove.utils import _import_utils
from azllm.corpus import pipeline, stage
read = _import_utils._is_distribution_available.cache_info().misses
steps = {v for m in (stage, pipeline) for v in vars(m).values() if isinstance(v, type) and issubclass(v, PipelineStep)}
steps = [s for s in steps if not inspect.isabstract(s)]
for step in steps:
    step.__new__(step)  # what unpickling a step does in a worker: datatrove's dependency check, no __init__
print(len(steps), _import_utils._is_distribution_available.cache_info().misses - read)
"""


def test_a_worker_forked_after_importing_the_stage_reads_no_package_metadata():
    """datatrove checks a step's dependencies when a worker unpickles it, reading the metadata of every installed
    package once per process (~0.25 s, in every worker the forkserver forks): importing the stage, which the
    forkserver preloads, answers that check for each step the stage uses."""
    out = subprocess.run([sys.executable, "-c", UNPICKLE_SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    steps, metadata_reads = map(int, out.stdout.split())
    assert steps >= 14 and metadata_reads == 0


STDIN_SCRIPT = """
import json, sys
from azllm.corpus import clean_corpus
from azllm.data import resolve_source
r = resolve_source({"path": "data/az/train/*"}, ROOT)
m = clean_corpus([r], OUT, eval_lines={"x": ["a b c"]}, languages=["az"], quality={}, tasks=2, workers=2)
print("RESULT", json.dumps({"kept": m["counts"]["by_source"]["total"]["kept_docs"], **m["performance"]}))
"""


STDIN_LIMIT_S = 120


def test_a_run_from_standard_input_finishes(tmp_path, data_root):
    """``python - < script.py``: the workers could not re-run ``<stdin>`` and were restarted forever (12 MB of
    tracebacks a minute); now the tasks run in the process, which says so, within the time limit."""
    script = STDIN_SCRIPT.replace("ROOT", repr(str(data_root))).replace("OUT", repr(str(tmp_path / "out")))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    env.pop("AZLLM_LOG", None)
    proc = subprocess.Popen(
        [sys.executable, "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
        env=env,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(script, timeout=STDIN_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the run and its forkserver, workers and manager
        out, _ = proc.communicate()
        pytest.fail(f"the run from standard input did not finish in {STDIN_LIMIT_S} s:\n" + out[-3000:])
    assert proc.returncode == 0, out[-3000:]
    assert "'<stdin>' does not exist" in out and "running the 2 tasks one after another in this process" in out
    result = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
    assert result["kept"] > 1000 and result["workers"] == 1
    assert "FileNotFoundError" not in out


def test_one_large_file_spreads_over_every_task_with_the_output_of_one_task(tmp_path, data_root, flores):
    """The whole training corpus as one file, cleaned by 3 tasks: each task reads its own third (every clean shard
    holds documents), and the kept documents, in input order, are byte for byte those of one task (exact and MinHash
    deduplication keep the earliest copy either way, since the pieces are contiguous and in order)."""
    from azllm.corpus import in_input_order

    src = tmp_path / "src"
    src.mkdir()
    with open(src / "all.txt", "wb") as f:
        for p in sorted((data_root / "data/az/train").glob("*.txt")):
            f.write(p.read_bytes())
    kept = {}
    for tasks in (1, 3):
        m = _clean(src, tmp_path / f"out{tasks}", {"flores": flores}, tasks=tasks, workers=1)
        folder = tmp_path / f"out{tasks}" / m["key"] / "clean"
        kept[tasks] = [(r["id"], r["text"]) for r in in_input_order(folder)]
        if tasks == 3:
            shards = sorted(folder.glob("*.jsonl"))
            assert len(shards) == 3 and all(s.stat().st_size > 0 for s in shards)
    assert kept[1] == kept[3] and len(kept[1]) > 500


def _records(path):
    """A shard's records without ``file_path`` (the reader's note of the work folder it read, which differs)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        rec["metadata"].pop("file_path", None)
        out.append(rec)
    return out


FEW = {"num_buckets": 2}
"""MinHash with 2 bands (2 bucket tasks instead of 14): the cluster tests start fewer tasks, like with like."""


def _output(out_root, m) -> tuple:
    """``(key, counts, {shard: records})`` of a finished stage."""
    folder = out_root / m["key"]
    return (
        m["key"],
        m["counts"],
        {p.relative_to(folder).as_posix(): _records(p) for p in sorted(folder.rglob("*.jsonl"))},
    )


@pytest.fixture(scope="module")
def local_output(tmp_path_factory, data_root, flores):
    """The local executor's output on the fixture corpus (2 tasks): what the Ray and Slurm runs must equal."""
    out = tmp_path_factory.mktemp("local")
    return _output(out, _clean(data_root / "data/az/train", out, {"flores": flores}, tasks=2, workers=2, minhash=FEW))


@pytest.mark.slow  # a local Ray cluster starts (~15 s) and runs the six steps
def test_the_stage_on_a_local_ray_cluster_keeps_what_the_local_executor_keeps(
    tmp_path, data_root, flores, local_output
):
    """``executor="ray"``: the stage starts a local Ray cluster (PyPI ``ray``), runs its six steps there through
    datatrove's RayPipelineExecutor, and stops it; every shard of cleaned and removed documents holds the same
    records as the local executor's (texts byte for byte, ids, order, reasons), and the counts are equal."""
    import ray

    m = _clean(
        data_root / "data/az/train", tmp_path, {"flores": flores}, tasks=2, workers=2, minhash=FEW, executor="ray"
    )
    assert m["performance"]["executor"] == "ray"
    assert _output(tmp_path, m) == local_output and len(local_output[2]) >= 2
    assert not ray.is_initialized()  # the cluster the stage started is stopped


@pytest.mark.slow  # six job arrays and their stats jobs on a one-node Slurm cluster (~1 min)
def test_the_stage_as_slurm_job_arrays_keeps_what_the_local_executor_keeps(
    tmp_path, data_root, flores, slurm_cluster, local_output
):
    """``executor="slurm"`` on a real one-node Slurm cluster (Debian's slurmctld and slurmd, started by the
    fixture): the six steps are submitted with sbatch as job arrays, each ``afterok`` the one before, and the records
    and counts equal the local executor's. ``wait: false`` submits and stops with a message; the same call while
    those jobs still run submits nothing and waits for them."""
    from azllm.corpus.stage import CorpusSubmitted

    src = data_root / "data/az/train"
    slurm = {"partition": slurm_cluster["partition"], "time": "00:20:00", "mem_per_cpu_gb": 1, "poll_s": 2}
    slurm["max_wait_hours"] = 0.25  # a job that never ends fails the test in 15 minutes instead of holding the suite
    with pytest.raises(CorpusSubmitted, match="submitted Slurm job"):
        _clean(
            src,
            tmp_path,
            {"flores": flores},
            tasks=2,
            workers=2,
            minhash=FEW,
            executor="slurm",
            executor_options={**slurm, "wait": False},
        )
    (record,) = tmp_path.glob("*.work/slurm_jobs.json")
    submitted = json.loads(record.read_text())
    assert len(submitted) == 6
    m = _clean(  # the jobs of the first call are still queued: this call waits for them, it submits nothing
        src, tmp_path, {"flores": flores}, tasks=2, workers=2, minhash=FEW, executor="slurm", executor_options=slurm
    )
    assert json.loads((tmp_path / m["key"] / "slurm_jobs.json").read_text()) == submitted
    assert m["performance"]["executor"] == "slurm" and _output(tmp_path, m) == local_output
    b = tmp_path / m["key"]
    scripts = sorted((b / "logs").glob("*/launch_script.slurm"))
    assert len(scripts) == 6 and all("#SBATCH --partition=debug" in s.read_text() for s in scripts)
