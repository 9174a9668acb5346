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
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor
from filelock import FileLock
from datatrove.pipeline.dedup.exact_dedup import (ExactDedupConfig, ExactDedupFilter, ExactDedupSignature,
                                                  ExactFindDedups)
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
                                              MinhashDedupFilter, MinhashDedupSignature)
from datatrove.pipeline.readers import JsonlReader
from datatrove.utils.hashing import HashConfig

from ..data import DataError, Resolved
from ..utils import atomic_write_text, json_hash, log_stream, replace_dir
from .pipeline import (STEPS, AzWords, DecontaminationFilter, LanguageFilter, QualityFilter, SourceReader,
                       exact_key, input_ids, read_jsonl, writer)

__all__ = ["clean_corpus", "corpus_key", "MANIFEST"]

MANIFEST = "manifest.json"
FORMAT = 3
"""Version of the stage's output (part of the key): raise it when the stage's code changes its output."""


def corpus_key(inputs: list[dict], settings: dict) -> str:
    """16 hex digits naming a cleaned corpus: equal inputs and settings, equal key."""
    return json_hash({"inputs": inputs, "settings": settings})


def _run(pipeline, work: Path, name: str, tasks: int, workers: int) -> None:
    """One datatrove executor run; its log lines go to :func:`azllm.utils.log_stream` (terminal or run log)
    and to ``<work>/logs/<name>/``."""
    from loguru import logger

    logger.remove()
    logger.add(log_stream(), level="INFO")   # the parent's lines; each task sets its own from sys.stderr
    with contextlib.redirect_stderr(log_stream()):
        LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=min(workers, tasks),
                              logging_dir=str(work / "logs" / name)).run()


def _fill_empty_shards(folder: Path, tasks: int) -> None:
    """A task that kept no document writes no file; later stages map file i to task i, so add empty ones."""
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(tasks):
        (folder / f"{r:05d}.jsonl").touch()


def _stages(sources, work: Path, eval_lines, settings, tasks: int, workers: int) -> None:
    """The six executor runs of :mod:`.pipeline` (each resumes its finished tasks)."""
    rm = work / "removed"
    sha1 = HashConfig(precision=64, hash_fc="sha1")   # datatrove's xxhash default needs xxhash<4; we pin 4
    excfg = ExactDedupConfig(content_getter=exact_key, hash_config=sha1)
    mh = MinhashConfig(**settings["minhash"], hash_config=sha1)
    _run([SourceReader(sources),
          QualityFilter(settings["quality"], exclusion_writer=writer(rm / "quality")),
          LanguageFilter(settings["languages"], exclusion_writer=writer(rm / "language")),
          DecontaminationFilter(eval_lines, settings["decontamination_n"], settings["decontamination_min_words"],
                                exclusion_writer=writer(rm / "decontamination")),
          writer(work / "filtered"),   # writers pass documents on; signature steps end a pipeline
          ExactDedupSignature(str(work / "exact_sigs"), config=excfg)], work, "1_filter", tasks, workers)
    _fill_empty_shards(work / "filtered", tasks)
    _run([ExactFindDedups(str(work / "exact_sigs"), str(work / "exact_dups"), config=excfg)],
         work, "2_exact_find", 1, 1)
    _run([JsonlReader(str(work / "filtered")),
          ExactDedupFilter(str(work / "exact_dups"), config=excfg, exclusion_writer=writer(rm / "exact_dedup")),
          writer(work / "exact"),
          MinhashDedupSignature(str(work / "mh_sigs"), config=mh, language=AzWords())], work, "3_exact_drop",
         tasks, workers)
    _fill_empty_shards(work / "exact", tasks)
    _run([MinhashDedupBuckets(str(work / "mh_sigs"), str(work / "mh_buckets"), config=mh)],
         work, "4_buckets", mh.num_buckets, workers)
    _run([MinhashDedupCluster(str(work / "mh_buckets"), str(work / "mh_clusters"), config=mh,
                              save_cluster_id=True, save_cluster_size=True)], work, "5_clusters", 1, 1)
    _run([JsonlReader(str(work / "exact")),
          MinhashDedupFilter(str(work / "mh_clusters"), exclusion_writer=writer(rm / "near_dedup"),
                             load_cluster_ids=True, load_cluster_sizes=True),
          writer(work / "clean")], work, "6_near_drop", tasks, workers)


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
        if "lang" in rec["metadata"]:   # documents the quality rules dropped never reached language ID
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
        raise DataError(f"corpus: source(s) {empty} filtered down to nothing (see removed/ in the work folder "
                        "for the reasons); drop them from the sources or relax corpus.quality / corpus.languages")


def clean_corpus(sources: list[Resolved], out_root: str | os.PathLike, *, eval_lines: dict[str, list[str]],
                 languages: list[str], quality: dict, decontamination_n: int = 13,
                 decontamination_min_words: int = 8, minhash: dict | None = None, tasks: int = 2,
                 workers: int = 2, force: bool = False) -> dict:
    """Clean ``sources`` into ``<out_root>/<key>/clean/*.jsonl`` and return its manifest.

    ``key`` (:func:`corpus_key`) covers the inputs' sha256s (hub: id/config/split) and every setting; an
    existing ``<key>/manifest.json`` is returned without work unless ``force``. Settings are the keyword
    arguments: languages kept, the thresholds of :func:`azllm.corpus.quality.quality_problem`, the
    decontamination n-gram length, MinHash's ``n_grams``/``num_buckets``/``hashes_per_bucket``, and
    ``tasks`` (shards) / ``workers`` (processes).

    Processes that call it at once (torchrun ranks) wait on a lock: one cleans, the others read its manifest.
    The workers are started by a forkserver that imports the caller's ``__main__``: a script calling this needs
    an ``if __name__ == "__main__":`` guard."""
    settings = {"format": FORMAT, "languages": list(languages), "quality": dict(quality), "decontamination_n": decontamination_n,
                "decontamination_min_words": decontamination_min_words,
                "minhash": {"n_grams": 5, "num_buckets": 14, "hashes_per_bucket": 8, **(minhash or {})},
                "eval_sets": {k: json_hash(v) for k, v in eval_lines.items()}, "tasks": tasks}
    sources = [replace(r, streaming=False) for r in sources]   # hub sources: downloaded once, cached
    inputs = input_ids(sources)
    out = Path(out_root) / corpus_key(inputs, settings)
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):   # several processes (torchrun ranks) of one run: one cleans, all read
        if (out / MANIFEST).is_file() and not force:
            return json.loads((out / MANIFEST).read_text())
        return _clean(sources, out, eval_lines, settings, inputs, tasks, workers)


def _clean(sources, out: Path, eval_lines, settings: dict, inputs: list, tasks: int, workers: int) -> dict:
    """The stage's work in ``<out>.work``, then the manifest, then the rename to ``out``."""
    work = out.with_name(out.name + ".work")
    t0 = time.perf_counter()
    _stages(sources, work, eval_lines, settings, tasks, workers)
    seconds = time.perf_counter() - t0
    counts = _counts(work)
    _check_sources(counts, sources)
    manifest = {"key": out.name, "inputs": inputs, "settings": settings, "counts": counts,
                "shards": sorted(str(p.relative_to(work)) for p in (work / "clean").glob("*.jsonl")),
                "performance": _performance(counts, seconds, workers)}
    for tmp in ("filtered", "exact", "exact_sigs", "exact_dups", "mh_sigs", "mh_buckets"):
        shutil.rmtree(work / tmp, ignore_errors=True)
    atomic_write_text(work / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False))
    replace_dir(work, out)
    return manifest


def _performance(counts: dict, seconds: float, workers: int) -> dict:
    """Throughput (input MB/s per worker) and peak memory (MiB, this process and its largest child)."""
    mb = counts["by_source"]["total"]["input_bytes"] / 1e6
    per_core = mb / seconds / max(workers, 1)
    return {"seconds": seconds, "input_mb": mb, "workers": workers, "mb_per_s_per_core": per_core,
            "peak_rss_mib_self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "peak_rss_mib_child": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "hours_for_15gb_on_16_cores": 15_000 / (per_core * 16) / 3600}
