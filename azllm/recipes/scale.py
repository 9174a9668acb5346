"""The scale benchmark (``azllm bench scale PARAMS``): corpus -> mix -> tokenizer -> token files on generated text
of growing size, each stage timed and its peak memory measured in a fresh process.

Reads the params' ``data.train`` (the files the text generator learns its words from), ``corpus``, ``tokenizer``,
``tokens`` and ``seed``. At each size (:func:`scale_config`): the generated files
(:func:`azllm.bench.scale.generate_text`) replace ``data.train``, the mix's caps, weights and total are off (every
kept sentence counts), and the run's artifacts go to ``<out>/artifacts/scale-<size>/``. Each stage runs in its own
process (:func:`azllm.bench.process.run_fresh`, target :func:`stage_job`); its time is the stage's own call (the
earlier stages' results are opened first, untimed), its peak RSS the larger of the process' own high-water mark
and that of its largest child or descendant (the corpus stage's workers, started by datatrove's forkserver, are
sampled by :class:`azllm.bench.process.TreeWatch`).

What it records (:func:`scale_benchmark`, ``<out>/scale.json``): per size and stage, seconds, CPU seconds, peak
RSS and the share of text the stage kept; per stage, the growth exponent of time and of peak RSS over size
(:func:`azllm.bench.scale.growth`), and the time extrapolated to 15 GB on 16 and 64 cores: the corpus stage and
the token files divide by cores (their tasks and threads are independent), the mix and the tokenizer do not (one
process each). :func:`scale_rows` and :func:`growth_rows` are the tables the command prints and docs/scale.md
shows; :func:`scale_figure` its plot.
"""

from __future__ import annotations

import json
import os
import re
import resource
import time
from pathlib import Path

from ..config import Config, derive
from .paths import ARTIFACTS_ENV, Paths
from .sources import resolve

__all__ = [
    "STAGES",
    "parse_size",
    "scale_config",
    "stage_job",
    "scale_benchmark",
    "scale_rows",
    "growth_rows",
    "scale_figure",
    "peers_benchmark",
    "scale_markdown",
]

STAGES = ("corpus", "mix", "tokenizer", "tokens")
PARALLEL = {"corpus": True, "mix": False, "tokenizer": False, "tokens": True}
"""Whether a stage's time divides by the cores (its work is split over processes or threads)."""
TARGET_MB = 15_000
NO_CAPS = {"max_bytes": None, "max_bytes_per_file": None, "max_lines": None}


def parse_size(text: str) -> int:
    """Bytes of a size written ``64M``, ``1G``, ``512K`` or a plain number (powers of 1024).

    >>> parse_size("64M"), parse_size("1G"), parse_size("1000")
    (67108864, 1073741824, 1000)
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)i?B?\s*", text, flags=re.I)
    if not m:
        raise ValueError(f"not a size: {text!r} (write e.g. 64M, 1G)")
    return int(float(m.group(1)) * 1024 ** " KMG".index(m.group(2).upper() or " "))


def _label(size: int) -> str:
    for unit, n in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if size % n == 0:
            return f"{size // n}{unit}"
    return str(size)


def scale_config(cfg: Config, text_dir: str | os.PathLike, label: str) -> Config:
    """The params of one size: the generated files, whole, as ``data.train``; no mix caps, weights or total."""
    return derive(
        cfg,
        run_name=f"scale-{label}",
        data={"train": {"path": str(Path(text_dir).resolve() / "gen_*.txt"), "hub": None, **NO_CAPS}},
        corpus={"enabled": True, "mix": {"caps": {}, "weights": {}, "total_bytes": None}},
        tokens={"tokenizer": None},
    )


# ------------------------------------------------------------------------------------------------- child side


def _peak_rss_mb() -> tuple[float, float]:
    from ..utils import peak_rss_mb

    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return peak_rss_mb(), children


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (the corpus stage's workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def stage_job(job: dict) -> dict:
    """Run one stage of one size (the target of :func:`azllm.bench.process.run_fresh`): the earlier stages'
    results are opened (made when missing), then the stage itself runs, timed."""
    import shutil

    from ..tokenizer import load_tokenizer
    from .corpus import corpus_mix, run_corpus
    from .tokenizers import main_tokenizer
    from .tokens import token_files

    cfg = Config.model_validate(job["config"])
    stage = job["stage"]
    paths = Paths.of(cfg)
    manifest = None if stage == "corpus" else run_corpus(cfg)
    if stage == "tokens":
        corpus_mix(cfg, manifest)
        tok = load_tokenizer(paths.tokenizer)
        shutil.rmtree(paths.tokens, ignore_errors=True)
    if stage == "tokenizer":
        shutil.rmtree(paths.tokenizer, ignore_errors=True)
    t0, c0 = time.perf_counter(), _cpu_seconds()
    out: dict = {}
    if stage == "corpus":
        manifest = run_corpus(cfg, force=True)
        total = manifest["counts"]["by_source"]["total"]
        out = {"input_bytes": total["input_bytes"], "kept_bytes": total["kept_bytes"]}
        out["kept_share"] = total["kept_bytes"] / max(total["input_bytes"], 1)
    elif stage == "mix":
        for p in paths.corpus(manifest["key"]).glob("mix-*"):
            p.unlink()
        _, mix = corpus_mix(cfg, manifest)
        sentences = sum(c["sentences"] for c in mix["counts"].values())
        dropped = sum(c["dropped_sentences"] for c in mix["counts"].values())
        out = {"sentences": sentences, "dropped_sentences": dropped, "kept_share": 1 - dropped / max(sentences, 1)}
        out["false_positive"] = (mix.get("sentence_filter") or {}).get("false_positive")
    elif stage == "tokenizer":
        tok = main_tokenizer(cfg)
        meta = json.loads((Path(tok.path) / "azllm_tokenizer.json").read_text())
        sampled = min(meta["corpus_lines"], cfg.tokenizer.input_sentence_size or meta["corpus_lines"])
        out = {"lines": meta["corpus_lines"], "sampled_lines": sampled}
    elif stage == "tokens":
        r = token_files(cfg, tok, progress=False)
        out = {"tokens": r["train_tokens"] + r["val_tokens"], "docs": r["train_docs"] + r["val_docs"]}
    seconds, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
    own, children = _peak_rss_mb()
    return {**out, "seconds": seconds, "cpu_seconds": cpu, "peak_rss_mb": max(own, children), "own_rss_mb": own}


# ------------------------------------------------------------------------------------------------ parent side


def scale_benchmark(
    cfg: Config, sizes: list[int], out: str | os.PathLike, *, timeout_s: float = 4 * 3600, stages=STAGES
) -> dict:
    """Every stage of ``stages`` at every size (smallest first), each in a fresh process; writes and returns
    ``<out>/scale.json``. A stage not in ``stages`` keeps its measurement from an earlier ``scale.json`` in ``out``
    on the same generated text (each stage records the git commit it was measured at).

    >>> cfg = load_params("params/default.yaml")  # doctest: +SKIP
    >>> r = scale_benchmark(cfg, [64 << 20, 1 << 30], "artifacts/bench/scale")  # doctest: +SKIP
    >>> r["growth"]["tokens"]["time_exponent"]  # doctest: +SKIP
    0.98
    """
    from ..bench.process import ok_or_raise, others_warning, run_fresh
    from ..bench.scale import generate_text, growth
    from ..utils import atomic_write_json, git_commit, log_stream, machine_info

    out = Path(out).resolve()
    model_files = [str(f) for f in resolve(cfg, cfg.data.train).files]
    if not model_files:
        raise ValueError("bench scale fits its text generator on data.train's local files; none matched")
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; the stages are {list(STAGES)}")
    earlier = _earlier_runs(out / "scale.json")
    runs, timed = [], []
    for size in sorted(sizes):
        label = _label(size)
        t0 = time.perf_counter()
        gen = generate_text(model_files, out / "text" / label, size, seed=cfg.seed)
        gen_s = time.perf_counter() - t0
        sized = scale_config(cfg, out / "text" / label, label)
        row = {"size": label, "bytes": gen["bytes"], "docs": gen["docs"], "sentences": gen["sentences"]}
        row["text_key"], row["generate_seconds"] = gen["key"], gen_s
        old = earlier.get(label, {})
        if old.get("text_key") == gen["key"]:  # the same text: stages not measured now keep their measurement
            row.update({k: v for k, v in old.items() if k in STAGES and k not in stages})
        for stage in (s for s in STAGES if s in stages):
            print(f"bench scale: {label} {stage}", file=log_stream(), flush=True)
            r = run_fresh(
                "azllm.recipes.scale:stage_job",
                {"config": sized.to_dict(), "stage": stage},
                timeout_s=timeout_s,
                env={ARTIFACTS_ENV: str(out / "artifacts")},
            )
            ok_or_raise(r, f"bench scale {label} {stage}")
            row[stage] = {k: v for k, v in r.items() if k not in ("status", "returncode")}
            row[stage]["peak_rss_mb"] = max(r["peak_rss_mb"], r.get("largest_rss_mb") or 0)  # forkserver workers
            row[stage]["commit"] = git_commit()
        runs.append(row)
    timed = [r[s] for r in runs for s in STAGES if s in r]
    record = {"sizes": runs, "machine": machine_info(), **others_warning(timed)}
    stages = [s for s in STAGES if all(s in r for r in runs)]
    if len(runs) >= 2:
        mb = [r["bytes"] / 1e6 for r in runs]
        record["growth"] = {}
        for stage in stages:
            t = growth(mb, [r[stage]["seconds"] for r in runs])
            m = growth(mb, [r[stage]["peak_rss_mb"] for r in runs])
            record["growth"][stage] = {
                "time_exponent": t["exponent"],
                "time_r2": t["r2"],
                "rss_exponent": m["exponent"],
                "rss_ratio": runs[-1][stage]["peak_rss_mb"] / runs[0][stage]["peak_rss_mb"],
                **_extrapolated(t, stage, record["machine"].get("cpu_count") or os.cpu_count() or 1),
            }
    atomic_write_json(out / "scale.json", record)
    return record


def _earlier_runs(path: Path) -> dict:
    """The per-size rows of an earlier ``scale.json``, by size label (none when there is none)."""
    try:
        return {r["size"]: r for r in json.loads(path.read_text())["sizes"]}
    except (OSError, ValueError, KeyError):
        return {}


def _extrapolated(fit: dict, stage: str, cores: int) -> dict:
    """Hours for 15 GB on 16 and 64 cores from the fitted curve measured on ``cores``."""
    from ..bench.scale import extrapolate

    here = extrapolate(fit, TARGET_MB) / 3600
    return {f"hours_15gb_{n}_cores": here * (cores / n if PARALLEL[stage] else 1.0) for n in (16, 64)}


def scale_rows(record: dict) -> list[dict]:
    """One row per size and stage: seconds, MB/s, peak RSS (MiB), kept share."""
    rows = []
    for r in record["sizes"]:
        for stage in STAGES:
            if stage not in r:
                continue
            s = r[stage]
            rows.append(
                {
                    "size": r["size"],
                    "stage": stage,
                    "seconds": s["seconds"],
                    "mb_per_s": r["bytes"] / 1e6 / max(s["seconds"], 1e-9),
                    "peak_rss_mib": s["peak_rss_mb"],
                    "kept": s.get("kept_share"),
                }
            )
    return rows


def growth_rows(record: dict) -> list[dict]:
    """One row per stage: growth exponents of time and peak RSS, RSS ratio largest/smallest, hours for 15 GB."""
    return [{"stage": stage, **g} for stage, g in record.get("growth", {}).items()]


def scale_figure(record: dict):
    """Seconds and peak RSS of each stage against size (log-log), one line per stage."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    mb = [r["bytes"] / 1e6 for r in record["sizes"]]
    for stage in STAGES:
        if stage not in record["sizes"][0]:
            continue
        for ax, key in zip(axes, ("seconds", "peak_rss_mb")):
            ax.plot(mb, [r[stage][key] for r in record["sizes"]], marker="o", label=stage)
    for ax, title in zip(axes, ("time (s)", "peak RSS (MiB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("generated text (MB)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------------------- peers


def peers_benchmark(cfg: Config, size: int, out: str | os.PathLike, *, rounds: int = 3) -> dict:
    """Token files by azllm, nanoGPT's ``datasets.map`` and datatrove's ``DocumentTokenizer``
    (:mod:`azllm.bench.peers`) on the same generated text of ``size`` and the tokenizer the scale run trained on
    it (trained first when missing), ``rounds`` rounds in rotating order; writes and returns ``<out>/peers.json``
    with each peer's median and range, and azllm's speed over each peer's (per core: the same cores for all)."""
    import shutil
    import statistics

    from ..bench.peers import PEERS
    from ..bench.process import ok_or_raise, others_warning, run_fresh
    from ..bench.scale import generate_text
    from ..utils import atomic_write_json, log_stream, machine_info

    out = Path(out).resolve()
    label = _label(size)
    model_files = [str(f) for f in resolve(cfg, cfg.data.train).files]
    gen = generate_text(model_files, out / "text" / label, size, seed=cfg.seed)
    sized = scale_config(cfg, out / "text" / label, label)
    env = {ARTIFACTS_ENV: str(out / "artifacts")}
    folder = out / "artifacts" / sized.run_name / "tokenizer"
    if not (folder / "tokenizer.json").is_file():
        ok_or_raise(
            run_fresh("azllm.recipes.scale:stage_job", {"config": sized.to_dict(), "stage": "tokenizer"}, env=env),
            "tokenizer",
        )
    eos = json.loads((folder / "tokenizer_config.json").read_text())["eos_token"]
    files = sorted(str(p) for p in (out / "text" / label).glob("gen_*.txt"))
    cores = os.cpu_count() or 1
    runs: dict[str, list[dict]] = {p: [] for p in PEERS}
    for r in range(rounds):
        for peer in PEERS[r % len(PEERS) :] + PEERS[: r % len(PEERS)]:
            work = out / "peers" / peer
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            print(f"bench peers: round {r} {peer}", file=log_stream(), flush=True)
            job = {"files": files, "tokenizer": str(folder), "eos_token": eos, "out": str(work), "cores": cores}
            res = ok_or_raise(run_fresh(f"azllm.bench.peers:encode_{peer}", job, timeout_s=3600), f"peer {peer}")
            runs[peer].append({k: v for k, v in res.items() if k not in ("status", "returncode")})
            shutil.rmtree(work, ignore_errors=True)
    summary = {}
    for peer, rs in runs.items():
        speeds = [x["mb_per_s_per_core"] for x in rs]
        summary[peer] = {
            "mb_per_s_per_core": statistics.median(speeds),
            "range": [min(speeds), max(speeds)],
            "peak_rss_mb": statistics.median(x["peak_rss_mb"] for x in rs),
            "tokens": rs[0]["tokens"],
        }
    base = summary["azllm"]["mb_per_s_per_core"]
    ratios = {f"azllm_vs_{p}": base / summary[p]["mb_per_s_per_core"] for p in PEERS if p != "azllm"}
    record = {
        "size": label,
        "bytes": gen["bytes"],
        "cores": cores,
        "rounds": rounds,
        "peers": summary,
        "ratios": ratios,
        "runs": runs,
        "machine": machine_info(),
        **others_warning([x for rs in runs.values() for x in rs]),
    }
    atomic_write_json(out / "peers.json", record)
    return record


def scale_markdown(record: dict, peers: dict | None = None) -> str:
    """The tables of docs/scale.md from a recorded ``scale.json`` (and ``peers.json``): each stage at each size,
    then each stage's growth and its extrapolation, then the peers. The docs hold exactly this text (a test
    renders it from the committed records)."""
    from ..utils import significant

    lines = ["| size | stage | seconds | MB/s | peak RSS (MiB) | kept |", "| --- | --- | --- | --- | --- | --- |"]
    for r in scale_rows(record):
        kept = f"{r['kept']:.3%}" if r["kept"] is not None else ""
        lines.append(
            f"| {r['size']} | {r['stage']} | {r['seconds']:.1f} | {r['mb_per_s']:.2f} | {r['peak_rss_mib']:.0f} "
            f"| {kept} |"
        )
    lines += [
        "",
        "| stage | time exponent | peak RSS exponent | peak RSS largest / smallest | hours for 15 GB, 16 cores "
        "| hours for 15 GB, 64 cores |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for g in growth_rows(record):
        lines.append(
            f"| {g['stage']} | {g['time_exponent']:.2f} | {g['rss_exponent']:.2f} | {g['rss_ratio']:.2f} "
            f"| {significant(g['hours_15gb_16_cores'], 2)} | {significant(g['hours_15gb_64_cores'], 2)} |"
        )
    if peers:
        lines += [
            "",
            "| token files | MB/s per core, median (range) | peak RSS (MiB) | tokens | azllm's speed over it |",
            "| --- | --- | --- | --- | --- |",
        ]
        for peer, s in peers["peers"].items():
            lo, hi = s["range"]
            ratio = peers["ratios"].get(f"azllm_vs_{peer}")
            lines.append(
                f"| {peer} | {s['mb_per_s_per_core']:.2f} ({lo:.2f}-{hi:.2f}) | {s['peak_rss_mb']:.0f} "
                f"| {s['tokens']:,} | {f'{ratio:.2f}x' if ratio else ''} |"
            )
    return "\n".join(lines)
