"""Run the corpus stage: :func:`clean_corpus` turns sources into cleaned shards with a manifest.

>>> manifest = clean_corpus([resolved], "artifacts/run/corpus", eval_lines={"flores": lines})  # doctest: +SKIP
>>> manifest["counts"]["total"]["kept"]  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import sys
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.exact_dedup import (
    ExactDedupConfig,
    ExactDedupFilter,
    ExactDedupSignature,
    ExactFindDedups,
)
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
from datatrove.utils._import_utils import check_required_dependencies
from datatrove.utils.hashing import HashConfig
from filelock import FileLock

from ..data import DataError, Resolved
from ..utils import atomic_write_text, json_hash, log_path, log_stream, replace_dir
from .pipeline import (
    STEPS,
    AzWords,
    DecontaminationFilter,
    LanguageFilter,
    QualityFilter,
    SourceReader,
    TouchShard,
    exact_key,
    input_ids,
    read_jsonl,
    writer,
)

__all__ = ["clean_corpus", "corpus_key", "CorpusSubmitted", "MANIFEST"]

MANIFEST = "manifest.json"
FORMAT = 4
"""Version of the stage's output (part of the key): raise it when the stage's code changes its output."""


def _check_step_dependencies() -> None:
    """What datatrove checks each time a process unpickles a step: its dependencies, for which it reads the metadata
    of every installed package once per process (~0.25 s on 2 cores, in each of a stage's dozen workers). Checked
    here, at import, the forkserver that preloads this module (:class:`_Executor`) has the answer for every worker
    it forks."""
    steps = (SourceReader, QualityFilter, LanguageFilter, DecontaminationFilter, TouchShard, JsonlReader, JsonlWriter)
    steps += (ExactDedupSignature, ExactFindDedups, ExactDedupFilter)
    steps += (MinhashDedupSignature, MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter)
    needed = {d for step in steps for t in step.mro() for d in getattr(t, "_requires_dependencies", [])}
    check_required_dependencies("azllm's corpus stage", sorted(needed, key=str))


_check_step_dependencies()


def corpus_key(inputs: list[dict], settings: dict) -> str:
    """16 hex digits naming a cleaned corpus: equal inputs and settings, equal key."""
    return json_hash({"inputs": inputs, "settings": settings})


class _Executor(LocalPipelineExecutor):
    """datatrove's local executor whose worker processes write their log where the parent's goes.

    Each worker (started by datatrove's forkserver) sets up its own loguru sinks on its ``sys.stderr``, which is
    the file descriptor 2 it inherited: in a report's kernel, a pipe the kernel shows as the page's stderr. So a
    worker first points its descriptor 2 at ``log`` (the run's log, :func:`azllm.utils.log_path`): loguru, Python
    tracebacks and anything native then reach the log and the terminal, never the page. Without ``log`` (no
    report) the workers keep the caller's stderr. The parent process, which runs the tasks itself when
    ``workers`` is 1, is left alone: :func:`_run` redirects its ``sys.stderr`` for the run."""

    def __init__(self, *args, log: str | None, **kwargs):
        super().__init__(*args, **kwargs)
        self.log, self.parent_pid = log, os.getpid()

    def run(self):
        """datatrove's run, its forkserver importing this stage's modules once: each worker it forks then finds
        them loaded instead of importing them again (datatrove, huggingface_hub, ~0.5 s a worker on 2 cores),
        which a corpus stage of six steps does a dozen times."""
        if self.start_method == "forkserver":
            import multiprocess

            multiprocess.get_context("forkserver").set_forkserver_preload(["__main__", __name__])
        return super().run()

    def _launch_run_for_rank(self, rank, ranks_q, completed=None, completed_lock=None):
        if self.log and os.getpid() != self.parent_pid and _WORKER_LOG.get("path") != self.log:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            sys.stderr.flush()
            os.dup2(fd, 2)  # a worker process is ours alone: its stderr stays on the log until it exits
            os.close(fd)
            _WORKER_LOG["path"] = self.log
        return super()._launch_run_for_rank(rank, ranks_q, completed, completed_lock)


_WORKER_LOG: dict = {}
"""In a worker process: the log its descriptor 2 points at (set once per process)."""


def _workers_can_start() -> tuple[bool, str]:
    """Whether datatrove's worker processes can start in this process, and why not.

    A worker of the forkserver re-runs the caller's main script by its path (``multiprocess.spawn``: when
    ``__main__`` was not started with ``-m`` and has a ``__file__``). With ``python - < script.py`` that path is
    ``<stdin>``, which is no file: every worker dies at start and the pool starts another, forever. A main module
    without ``__file__`` (``python -c``, an interactive session, a Jupyter kernel, where ``__main__`` is the
    kernel's namespace) is not re-run, so workers start there; so they do with ``python -m`` and with a script
    file (which needs an ``if __name__ == "__main__":`` guard).
    """
    from multiprocess import process

    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None):
        return True, "started with -m"
    path = getattr(main, "__file__", None)
    if path is None:
        return True, "no main script"
    full = path if os.path.isabs(path) else os.path.join(process.ORIGINAL_DIR or os.getcwd(), path)
    if os.path.isfile(full):
        return True, f"main script {full}"
    return False, (
        f"the main module's file {path!r} does not exist (a script read from standard input?), so "
        "worker processes cannot start"
    )


class CorpusSubmitted(DataError):
    """The stage's Slurm jobs are submitted and ``corpus.slurm.wait`` is false: run the same command again once they
    have finished, and it goes on from their output."""


def _executor(engine: dict, pipeline, work: Path, name: str, tasks: int, workers: int, depends):
    """One datatrove executor of ``engine["executor"]`` (local, ray, slurm) for one step, depending on the step
    before; its logs, stats and completion marks go to ``<work>/logs/<name>/``."""
    kind, logs = engine.get("executor", "local"), str(work / "logs" / name)
    if kind == "local":
        return _Executor(
            pipeline=pipeline,
            tasks=tasks,
            workers=min(workers, tasks),
            logging_dir=logs,
            depends=depends,
            log=log_path(),
        )
    if kind == "ray":
        from datatrove.executor import RayPipelineExecutor

        o = engine.get("ray") or {}
        return RayPipelineExecutor(
            pipeline=pipeline,
            tasks=tasks,
            workers=tasks,
            depends=depends,
            logging_dir=logs,
            cpus_per_task=o.get("cpus_per_task", 1),
            mem_per_cpu_gb=o.get("mem_per_cpu_gb", 2.0),
        )
    if kind == "slurm":
        from datatrove.executor import SlurmPipelineExecutor

        o = engine.get("slurm") or {}
        if not o.get("partition"):
            raise DataError("corpus.executor is slurm: set corpus.slurm.partition")
        return SlurmPipelineExecutor(
            pipeline=pipeline,
            tasks=tasks,
            time=o.get("time", "24:00:00"),
            partition=o["partition"],
            cpus_per_task=o.get("cpus_per_task", 1),
            mem_per_cpu_gb=o.get("mem_per_cpu_gb", 2.0),
            qos=o.get("qos", "normal"),
            job_name=f"{o.get('job_name', 'azllm-corpus')}-{name}",
            env_command=o.get("env_command") or f"source {Path(sys.prefix) / 'bin' / 'activate'}",
            sbatch_args=o.get("sbatch_args") or None,
            depends=depends,
            logging_dir=logs,
            mail_type="NONE",
        )
    raise DataError(f"corpus.executor must be local, ray or slurm, got {kind!r}")


def _check_done(name: str, ex, work: Path) -> None:
    """Every task of a step finished, or a :class:`DataError` that names the step, its tasks and its logs."""
    left = ex.get_incomplete_ranks(range(ex.world_size), skip_completed=True)
    if left:
        raise DataError(
            f"corpus: step {name}: task(s) {left[:10]}{' ...' if len(left) > 10 else ''} of {ex.world_size} did not "
            f"finish; their logs are in {work / 'logs' / name}. The same command resumes the unfinished tasks."
        )


@contextlib.contextmanager
def _ray_cluster(options: dict, cpus: int):
    """A Ray cluster for the stage: the one already connected, ``address`` / ``$RAY_ADDRESS``, or a local one with
    ``cpus`` CPUs that is stopped afterwards. Workers' output stays in Ray's and datatrove's logs, never in a page."""
    import ray

    if ray.is_initialized():
        yield
        return
    address = options.get("address") or os.environ.get("RAY_ADDRESS")
    kwargs = {"address": address} if address else {"num_cpus": max(1, cpus), "include_dashboard": False}
    ray.init(log_to_driver=False, configure_logging=False, **kwargs)
    try:
        yield
    finally:
        ray.shutdown()


def _run_steps(steps: list, work: Path, engine: dict, workers: int) -> None:
    """The steps (``(name, pipeline, tasks, workers)``), each depending on the one before: on this machine and on
    Ray one after another, each checked complete before the next starts (a failed step stops the stage instead of
    waiting for it); on Slurm submitted at once as dependent job arrays, then waited for."""
    from loguru import logger

    kind = engine.get("executor", "local")
    execs, prev = [], None
    for name, pipeline, tasks, step_workers in steps:
        prev = _executor(engine, pipeline, work, name, tasks, step_workers, prev)
        execs.append((name, prev))
    logger.remove()
    logger.add(log_stream(), level="INFO")  # the parent's lines; each task sets its own from sys.stderr
    with contextlib.redirect_stderr(log_stream()):
        if kind == "slurm":
            _submit_and_wait(execs, work, engine.get("slurm") or {})
            return
        cluster = _ray_cluster(engine.get("ray") or {}, workers) if kind == "ray" else contextlib.nullcontext()
        with cluster:
            for name, ex in execs:
                ex.run()
                _check_done(name, ex, work)


def _queued(ids: list[str]) -> list[str]:
    """The jobs of ``ids`` that Slurm still has queued or running (``squeue``)."""
    import subprocess

    if not ids:
        return []
    out = subprocess.run(["squeue", "-h", "-o", "%A", "-j", ",".join(ids)], capture_output=True, text=True).stdout
    return out.split()


def _submit_and_wait(execs: list, work: Path, options: dict) -> None:
    """Submit the chain of Slurm job arrays (the last step launches the ones it depends on) unless jobs of an
    earlier submission are still queued or running (``<work>/slurm_jobs.json``: a second call never submits twice),
    then wait for the last step's tasks. Stops when no job of the chain is left but tasks are unfinished (naming the
    step and its logs), or after ``max_wait_hours``."""
    name, last = execs[-1]
    if all(not ex.get_incomplete_ranks(range(ex.world_size), skip_completed=True) for _, ex in execs):
        return
    record = work / "slurm_jobs.json"
    ids = json.loads(record.read_text()) if record.is_file() else []
    if not _queued(ids):
        last.run()  # sbatch of every unfinished step, each afterok the one before
        ids = [str(ex.job_id) for _, ex in execs if ex.job_id not in (None, -1)]
        atomic_write_text(record, json.dumps(ids))
    if not options.get("wait", True):
        raise CorpusSubmitted(
            f"corpus: submitted Slurm job(s) {', '.join(ids)} (logs in {work / 'logs'}); run the same command again "
            "when they have finished"
        )
    deadline = time.monotonic() + 3600 * float(options.get("max_wait_hours", 72))
    while last.get_incomplete_ranks(range(last.world_size), skip_completed=True):
        if time.monotonic() > deadline:
            raise DataError(f"corpus: the Slurm jobs {ids} did not finish within corpus.slurm.max_wait_hours")
        if not _queued(ids) and last.get_incomplete_ranks(range(last.world_size), skip_completed=True):
            for n, ex in execs:  # nothing left to run: the step that failed says so
                _check_done(n, ex, work)
        time.sleep(float(options.get("poll_s", 60)))
    for n, ex in execs:
        _check_done(n, ex, work)


def _stages(sources, work: Path, eval_lines, settings, tasks: int, workers: int, engine: dict) -> None:
    """The six steps of :mod:`.pipeline` on ``engine``'s executor (each resumes its finished tasks)."""
    rm = work / "removed"
    sha1 = HashConfig(precision=64, hash_fc="sha1")  # datatrove's xxhash default needs xxhash<4; we pin 4
    excfg = ExactDedupConfig(content_getter=exact_key, hash_config=sha1)
    mh = MinhashConfig(**settings["minhash"], hash_config=sha1)
    steps = [
        (
            "1_filter",
            [
                SourceReader(sources),
                TouchShard(work / "filtered"),  # later steps read shard i as task i, also an empty one
                QualityFilter(settings["quality"], exclusion_writer=writer(rm / "quality")),
                LanguageFilter(settings["languages"], exclusion_writer=writer(rm / "language")),
                DecontaminationFilter(
                    eval_lines,
                    settings["decontamination_n"],
                    settings["decontamination_min_words"],
                    exclusion_writer=writer(rm / "decontamination"),
                ),
                writer(work / "filtered"),  # writers pass documents on; signature steps end a pipeline
                ExactDedupSignature(str(work / "exact_sigs"), config=excfg),
            ],
            tasks,
            workers,
        ),
        ("2_exact_find", [ExactFindDedups(str(work / "exact_sigs"), str(work / "exact_dups"), config=excfg)], 1, 1),
        (
            "3_exact_drop",
            [
                JsonlReader(str(work / "filtered")),
                TouchShard(work / "exact"),
                ExactDedupFilter(str(work / "exact_dups"), config=excfg, exclusion_writer=writer(rm / "exact_dedup")),
                writer(work / "exact"),
                MinhashDedupSignature(str(work / "mh_sigs"), config=mh, language=AzWords()),
            ],
            tasks,
            workers,
        ),
        (
            "4_buckets",
            [MinhashDedupBuckets(str(work / "mh_sigs"), str(work / "mh_buckets"), config=mh)],
            mh.num_buckets,
            workers,
        ),
        (
            "5_clusters",
            [
                MinhashDedupCluster(
                    str(work / "mh_buckets"),
                    str(work / "mh_clusters"),
                    config=mh,
                    save_cluster_id=True,
                    save_cluster_size=True,
                )
            ],
            1,
            1,
        ),
        (
            "6_near_drop",
            [
                JsonlReader(str(work / "exact")),
                MinhashDedupFilter(
                    str(work / "mh_clusters"),
                    exclusion_writer=writer(rm / "near_dedup"),
                    load_cluster_ids=True,
                    load_cluster_sizes=True,
                ),
                writer(work / "clean"),
            ],
            tasks,
            workers,
        ),
    ]
    _run_steps(steps, work, engine, workers)


def _counts(work: Path) -> dict:
    """Documents and bytes kept and removed by each step, in total and per source; the language mix."""
    per = defaultdict(lambda: Counter())
    langs = Counter()

    def add(rec, column):
        src, b = rec["metadata"]["source"], len(rec["text"].encode("utf-8"))
        for key in (src, "total"):
            per[key][f"{column}_docs"] += 1
            per[key][f"{column}_bytes"] += b
            per[key]["input_docs"] += 1
            per[key]["input_bytes"] += b
        if "lang" in rec["metadata"]:  # documents the quality rules dropped never reached language ID
            langs[rec["metadata"]["lang"]] += 1

    for rec in read_jsonl(work / "clean"):
        add(rec, "kept")
    for step in STEPS:
        for rec in read_jsonl(work / "removed" / step):
            add(rec, step)
    return {"by_source": {k: dict(v) for k, v in sorted(per.items())}, "languages": dict(langs.most_common())}


def _check_sources(counts: dict, sources: list[Resolved]) -> None:
    """A source (or the whole input) that filters down to nothing is an error, not an empty corpus."""
    by = counts["by_source"]
    if not by.get("total", {}).get("kept_docs"):
        raise DataError("corpus: every document was filtered out; check corpus.languages and corpus.quality")
    empty = [s for s, c in by.items() if s != "total" and not c.get("kept_docs")]
    if empty:
        raise DataError(
            f"corpus: source(s) {empty} filtered down to nothing (see removed/ in the work folder "
            "for the reasons); drop them from the sources or relax corpus.quality / corpus.languages"
        )


def clean_corpus(
    sources: list[Resolved],
    out_root: str | os.PathLike,
    *,
    eval_lines: dict[str, list[str]],
    languages: list[str],
    quality: dict,
    decontamination_n: int = 13,
    decontamination_min_words: int = 8,
    minhash: dict | None = None,
    tasks: int = 2,
    workers: int = 2,
    executor: str = "local",
    executor_options: dict | None = None,
    force: bool = False,
) -> dict:
    """Clean ``sources`` into ``<out_root>/<key>/clean/*.jsonl`` and return its manifest.

    ``key`` (:func:`corpus_key`) covers the inputs' sha256s (hub: id/config/split) and every setting; an
    existing ``<key>/manifest.json`` is returned without work unless ``force``. Settings are the keyword
    arguments: languages kept, the thresholds of :func:`azllm.corpus.quality.quality_problem`, the
    decontamination n-gram length, MinHash's ``n_grams``/``num_buckets``/``hashes_per_bucket``, and
    ``tasks`` (shards) / ``workers`` (processes). ``executor``: where the tasks run, ``local`` (this machine's
    processes), ``ray`` or ``slurm`` (datatrove's executors, with ``executor_options``: the ``corpus.ray`` /
    ``corpus.slurm`` params); the output is the same on each (the key leaves it out).

    Processes that call it at once (torchrun ranks) wait on a lock: one cleans, the others read its manifest.
    The workers are started by a forkserver, and each re-runs the caller's main script by its path: a script
    calling this needs an ``if __name__ == "__main__":`` guard. A main module whose file does not exist (a script
    read from standard input, ``python - < script.py``) cannot be re-run, and its workers would die at start and
    be restarted forever: there the tasks run one after another in this process (``workers=1``, said in the log;
    same tasks, same output, recorded as 1 worker in ``performance``). Running in-process was chosen over
    failing, because the result is the same and only slower; detecting it beforehand (:func:`_workers_can_start`
    mirrors the rule of ``multiprocess.spawn``) was chosen over watching for dying workers, which the pool hides.
    ``python -c``, interactive sessions and Jupyter kernels have no main file to re-run: workers start there.
    The workers' datatrove log goes where this process's does (:class:`_Executor`)."""
    settings = {
        "format": FORMAT,
        "languages": list(languages),
        "quality": dict(quality),
        "decontamination_n": decontamination_n,
        "decontamination_min_words": decontamination_min_words,
        "minhash": {"n_grams": 5, "num_buckets": 14, "hashes_per_bucket": 8, **(minhash or {})},
        "eval_sets": {k: json_hash(v) for k, v in eval_lines.items()},
        "tasks": tasks,
    }
    sources = [replace(r, streaming=False) for r in sources]  # hub sources: downloaded once, cached
    inputs = input_ids(sources)
    out = Path(out_root) / corpus_key(inputs, settings)
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):  # several processes (torchrun ranks) of one run: one cleans, all read
        if (out / MANIFEST).is_file() and not force:
            return json.loads((out / MANIFEST).read_text())
        engine = {"executor": executor, executor: dict(executor_options or {})}
        return _clean(sources, out, eval_lines, settings, inputs, tasks, workers, engine)


def _clean(
    sources, out: Path, eval_lines, settings: dict, inputs: list, tasks: int, workers: int, engine: dict
) -> dict:
    """The stage's work in ``<out>.work``, then the manifest, then the rename to ``out``."""
    work = out.with_name(out.name + ".work")
    can, why = _workers_can_start()
    if workers > 1 and not can and engine["executor"] == "local":
        print(
            f"azllm corpus: {why}: running the {tasks} tasks one after another in this process; for "
            f'{workers} worker processes run the script from a file (with an `if __name__ == "__main__":` '
            "guard)",
            file=log_stream(),
            flush=True,
        )
        workers = 1
    t0 = time.perf_counter()
    _stages(sources, work, eval_lines, settings, tasks, workers, engine)
    seconds = time.perf_counter() - t0
    counts = _counts(work)
    _check_sources(counts, sources)
    manifest = {
        "key": out.name,
        "inputs": inputs,
        "settings": settings,
        "counts": counts,
        "shards": sorted(str(p.relative_to(work)) for p in (work / "clean").glob("*.jsonl")),
        "performance": {**_performance(counts, seconds, workers), "executor": engine["executor"]},
    }
    for tmp in ("filtered", "exact", "exact_sigs", "exact_dups", "mh_sigs", "mh_buckets"):
        shutil.rmtree(work / tmp, ignore_errors=True)
    atomic_write_text(work / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False))
    replace_dir(work, out)
    return manifest


def _performance(counts: dict, seconds: float, workers: int) -> dict:
    """Throughput (input MB/s per worker) and peak memory (MiB, this process and its largest child)."""
    mb = counts["by_source"]["total"]["input_bytes"] / 1e6
    per_core = mb / seconds / max(workers, 1)
    return {
        "seconds": seconds,
        "input_mb": mb,
        "workers": workers,
        "mb_per_s_per_core": per_core,
        "peak_rss_mib_self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_rss_mib_child": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "hours_for_15gb_on_16_cores": 15_000 / (per_core * 16) / 3600,
    }
