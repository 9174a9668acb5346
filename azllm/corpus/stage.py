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
from datatrove.utils.hashing import HashConfig
from filelock import FileLock

from ..data import DataError, Resolved
from ..utils import LOG_ENV, atomic_write_text, json_hash, log_stream, replace_dir
from .pipeline import (
    STEPS,
    AzWords,
    DecontaminationFilter,
    LanguageFilter,
    QualityFilter,
    SourceReader,
    exact_key,
    input_ids,
    read_jsonl,
    writer,
)

__all__ = ["clean_corpus", "corpus_key", "MANIFEST"]

MANIFEST = "manifest.json"
FORMAT = 4
"""Version of the stage's output (part of the key): raise it when the stage's code changes its output."""


def corpus_key(inputs: list[dict], settings: dict) -> str:
    """16 hex digits naming a cleaned corpus: equal inputs and settings, equal key."""
    return json_hash({"inputs": inputs, "settings": settings})


class _Executor(LocalPipelineExecutor):
    """datatrove's local executor whose worker processes write their log where the parent's goes.

    Each worker (started by datatrove's forkserver) sets up its own loguru sinks on its ``sys.stderr``, which is
    the file descriptor 2 it inherited: in a report's kernel, a pipe the kernel shows as the page's stderr. So a
    worker first points its descriptor 2 at ``log`` (the run's log, :data:`azllm.utils.LOG_ENV`): loguru, Python
    tracebacks and anything native then reach the log and the terminal, never the page. Without ``log`` (no
    report) the workers keep the caller's stderr. The parent process, which runs the tasks itself when
    ``workers`` is 1, is left alone: :func:`_run` redirects its ``sys.stderr`` for the run."""

    def __init__(self, *args, log: str | None, **kwargs):
        super().__init__(*args, **kwargs)
        self.log, self.parent_pid = log, os.getpid()

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


def _run(pipeline, work: Path, name: str, tasks: int, workers: int) -> None:
    """One datatrove executor run; its log lines, the workers' included (:class:`_Executor`), go to
    :func:`azllm.utils.log_stream` (terminal or run log) and to ``<work>/logs/<name>/``."""
    from loguru import logger

    logger.remove()
    logger.add(log_stream(), level="INFO")  # the parent's lines; each task sets its own from sys.stderr
    with contextlib.redirect_stderr(log_stream()):
        _Executor(
            pipeline=pipeline,
            tasks=tasks,
            workers=min(workers, tasks),
            logging_dir=str(work / "logs" / name),
            log=os.environ.get(LOG_ENV) or None,
        ).run()


def _fill_empty_shards(folder: Path, tasks: int) -> None:
    """A task that kept no document writes no file; later stages map file i to task i, so add empty ones."""
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(tasks):
        (folder / f"{r:05d}.jsonl").touch()


def _stages(sources, work: Path, eval_lines, settings, tasks: int, workers: int) -> None:
    """The six executor runs of :mod:`.pipeline` (each resumes its finished tasks)."""
    rm = work / "removed"
    sha1 = HashConfig(precision=64, hash_fc="sha1")  # datatrove's xxhash default needs xxhash<4; we pin 4
    excfg = ExactDedupConfig(content_getter=exact_key, hash_config=sha1)
    mh = MinhashConfig(**settings["minhash"], hash_config=sha1)
    _run(
        [
            SourceReader(sources),
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
        work,
        "1_filter",
        tasks,
        workers,
    )
    _fill_empty_shards(work / "filtered", tasks)
    _run(
        [ExactFindDedups(str(work / "exact_sigs"), str(work / "exact_dups"), config=excfg)], work, "2_exact_find", 1, 1
    )
    _run(
        [
            JsonlReader(str(work / "filtered")),
            ExactDedupFilter(str(work / "exact_dups"), config=excfg, exclusion_writer=writer(rm / "exact_dedup")),
            writer(work / "exact"),
            MinhashDedupSignature(str(work / "mh_sigs"), config=mh, language=AzWords()),
        ],
        work,
        "3_exact_drop",
        tasks,
        workers,
    )
    _fill_empty_shards(work / "exact", tasks)
    _run(
        [MinhashDedupBuckets(str(work / "mh_sigs"), str(work / "mh_buckets"), config=mh)],
        work,
        "4_buckets",
        mh.num_buckets,
        workers,
    )
    _run(
        [
            MinhashDedupCluster(
                str(work / "mh_buckets"),
                str(work / "mh_clusters"),
                config=mh,
                save_cluster_id=True,
                save_cluster_size=True,
            )
        ],
        work,
        "5_clusters",
        1,
        1,
    )
    _run(
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
        work,
        "6_near_drop",
        tasks,
        workers,
    )


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
    force: bool = False,
) -> dict:
    """Clean ``sources`` into ``<out_root>/<key>/clean/*.jsonl`` and return its manifest.

    ``key`` (:func:`corpus_key`) covers the inputs' sha256s (hub: id/config/split) and every setting; an
    existing ``<key>/manifest.json`` is returned without work unless ``force``. Settings are the keyword
    arguments: languages kept, the thresholds of :func:`azllm.corpus.quality.quality_problem`, the
    decontamination n-gram length, MinHash's ``n_grams``/``num_buckets``/``hashes_per_bucket``, and
    ``tasks`` (shards) / ``workers`` (processes).

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
        return _clean(sources, out, eval_lines, settings, inputs, tasks, workers)


def _clean(sources, out: Path, eval_lines, settings: dict, inputs: list, tasks: int, workers: int) -> dict:
    """The stage's work in ``<out>.work``, then the manifest, then the rename to ``out``."""
    work = out.with_name(out.name + ".work")
    can, why = _workers_can_start()
    if workers > 1 and not can:
        print(
            f"azllm corpus: {why}: running the {tasks} tasks one after another in this process; for "
            f'{workers} worker processes run the script from a file (with an `if __name__ == "__main__":` '
            "guard)",
            file=log_stream(),
            flush=True,
        )
        workers = 1
    t0 = time.perf_counter()
    _stages(sources, work, eval_lines, settings, tasks, workers)
    seconds = time.perf_counter() - t0
    counts = _counts(work)
    _check_sources(counts, sources)
    manifest = {
        "key": out.name,
        "inputs": inputs,
        "settings": settings,
        "counts": counts,
        "shards": sorted(str(p.relative_to(work)) for p in (work / "clean").glob("*.jsonl")),
        "performance": _performance(counts, seconds, workers),
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
