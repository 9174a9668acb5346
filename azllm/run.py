"""The run layer: a params file -> the run's artifacts. The only module that reads a :class:`~azllm.config.Config`.

Like torchtune's recipes, each step is a small function that takes the config, calls the library with plain named
arguments, and returns plain results; the notebooks call these steps and show what comes back.

- where things are: :func:`data_root`, :func:`artifacts_dir`, :func:`resolve`;
- the corpus stage: :func:`corpus`, :func:`corpus_mix`, :func:`corpus_source`;
- the tokenizer study: :func:`training_source`, :func:`eval_sets`, :func:`tokenizer_options`,
  :func:`train_tokenizers`, :func:`baselines`;
- the run's tokenizer and token files: :func:`main_tokenizer`, :func:`token_files`, :func:`prepare_data`;
- training: :func:`build_model`, :func:`train` (and :func:`train_method`, its fresh-process entry);
- measurements: :func:`encoder_benchmark`, :func:`training_benchmark`, :func:`fit_models`.

Artifacts go to ``artifacts/<run_name>/`` (or ``$AZLLM_ARTIFACTS/<run_name>/``); every step is idempotent, so a
re-run reuses what is already there.

>>> cfg = load("params/tiny.yaml")  # doctest: +SKIP
>>> data = prepare_data(cfg)  # doctest: +SKIP
>>> result = train(cfg, data)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import data as azdata
from .config import Config, SourceConfig, load_params
from .utils import atomic_write_json, json_hash, route_library_output

__all__ = ["load", "setup", "data_root", "artifacts_dir", "resolve", "corpus", "corpus_mix", "corpus_source",
           "training_source", "eval_sets",
           "tokenizer_options", "sweep_options", "train_tokenizers", "main_tokenizer", "baselines", "tokens_dir",
           "token_files", "dev_token_files", "prepare_data", "run_key", "fit_base", "build_model",
           "distributed_guard", "train", "train_method",
           "encoder_benchmark", "benchmark_job", "benchmark_variant", "training_benchmark", "fit_models", "DATA_ROOT_ENV", "ARTIFACTS_ENV"]

DATA_ROOT_ENV = "AZLLM_DATA_ROOT"
ARTIFACTS_ENV = "AZLLM_ARTIFACTS"


def load(params_file: str | os.PathLike | None, overrides: dict | None = None) -> Config:
    """The validated config of a params file (:func:`azllm.config.load_params`)."""
    return load_params(params_file, overrides)


def setup(params_file: str | os.PathLike, overrides: dict | None = None) -> Config:
    """The first call of every notebook: library warnings and progress bars go to the run's log (the terminal of
    ``make report``), not into the page; then the config is loaded."""
    route_library_output()
    return load(params_file, overrides)


# ------------------------------------------------------------------------------------------------ locations

def data_root(cfg: Config) -> Path | None:
    """The data root: ``data.root``, else ``$AZLLM_DATA_ROOT``, else None (hub sources only)."""
    root = cfg.data.root or os.environ.get(DATA_ROOT_ENV)
    return Path(root).expanduser().resolve() if root else None


def artifacts_dir(cfg: Config) -> Path:
    """Heavy artifacts (tokenizers, token files, checkpoints): ``$AZLLM_ARTIFACTS`` or ``./artifacts``, one folder
    per run name. Git ignores ``artifacts/``."""
    return (Path(os.environ.get(ARTIFACTS_ENV, "artifacts")) / cfg.run_name).resolve()


def resolve(cfg: Config, source: SourceConfig, **over) -> azdata.Resolved:
    """A source of the params resolved against the data root (``over`` replaces fields, e.g. a cap)."""
    return azdata.resolve_source({**source.model_dump(), **over}, data_root(cfg))


# ------------------------------------------------------------------------------------------ tokenizer study

def corpus(cfg: Config, *, force: bool = False) -> dict:
    """The corpus stage on ``data.train`` (:func:`azllm.corpus.clean_corpus`, cached by inputs and settings
    in ``artifacts/<run>/corpus/<key>``); returns its manifest."""
    from .corpus import clean_corpus

    c = cfg.corpus
    evals, par, _ = eval_sets(cfg)
    lines = {**evals, **{f"{k}.az": v[0] for k, v in par.items()}}
    cores = os.cpu_count() or 1
    return clean_corpus([resolve(cfg, cfg.data.train)], artifacts_dir(cfg) / "corpus", eval_lines=lines,
                        languages=c.languages, quality=c.quality.model_dump(), decontamination_n=c.decontamination_n,
                        decontamination_min_words=c.decontamination_min_words, minhash=c.minhash.model_dump(),
                        tasks=c.tasks or cores, workers=c.workers or cores, force=force)


def corpus_mix(cfg: Config, manifest: dict) -> tuple[Path, dict]:
    """The mixed corpus of ``corpus.mix`` (written once per mix): its path and ``{rates, counts}``."""
    from .corpus import in_input_order, rates, write_mix
    from .corpus.mix import check_names

    m = cfg.corpus.mix
    folder = artifacts_dir(cfg) / "corpus" / manifest["key"]
    sizes = {k: v.get("kept_bytes", 0) for k, v in manifest["counts"]["by_source"].items() if k != "total"}
    check_names(m.caps, sizes, "caps")
    r = rates(sizes, temperature=m.temperature, weights=m.weights, total_bytes=m.total_bytes,
              max_repeat=m.max_repeat)
    key = json_hash({"rates": r, "caps": m.caps, "sentence_dedup": m.sentence_dedup, "seed": cfg.seed})
    path = folder / f"mix-{key}.jsonl"
    counts_file = path.with_suffix(".counts.json")
    if not (path.is_file() and counts_file.is_file()):
        counts = write_mix(in_input_order(folder / "clean"), path, source_rates=r, caps=m.caps,
                           sentence_dedup=m.sentence_dedup, seed=cfg.seed)
        atomic_write_json(counts_file, {"rates": r, "caps": m.caps, "counts": counts})
    return path, json.loads(counts_file.read_text())


def corpus_source(cfg: Config) -> azdata.Resolved:
    """What token files (and, capped, tokenizers) read: the corpus mix, or ``data.train`` when
    ``corpus.enabled`` is false."""
    if not cfg.corpus.enabled:
        return resolve(cfg, cfg.data.train)
    path, _ = corpus_mix(cfg, corpus(cfg))
    return azdata.resolve_source({"path": str(path)}, None)


def training_source(cfg: Config) -> azdata.Resolved:
    """What tokenizers train on: :func:`corpus_source`; without the corpus stage, ``data.train`` with
    ``tokenizer.max_bytes_per_file`` applied."""
    cap = cfg.tokenizer.max_bytes_per_file
    if cfg.corpus.enabled or cap is None:
        return corpus_source(cfg)
    return resolve(cfg, cfg.data.train, max_bytes_per_file=cap)


def eval_sets(cfg: Config) -> tuple[dict[str, list[str]], dict[str, tuple[list[str], list[str]]], dict]:
    """The held-out sets and line-parallel pairs (normalized lines, order kept) and their resolved sources.

    Returns ``(eval_sets, parallel, resolved)``; ``resolved`` maps ``eval.<name>`` / ``parallel.<name>.<side>`` to
    the :class:`azllm.data.Resolved` of each input, for the sha256s in the report.
    """
    from .text import normalize

    evals, par, res = {}, {}, {}
    for name, spec in cfg.data.eval.items():
        res[f"eval.{name}"] = r = resolve(cfg, spec)
        evals[name] = list(azdata.iter_documents(r))
    for name, pair in cfg.data.parallel.items():
        sides = {}
        for side in ("az", "en"):
            res[f"parallel.{name}.{side}"] = r = resolve(cfg, getattr(pair, side))
            sides[side] = [normalize(t) for t in azdata.source_lines(r)]
        if len(sides["az"]) != len(sides["en"]):
            raise azdata.DataError(f"parallel set {name!r}: {len(sides['az'])} Azerbaijani lines but "
                                   f"{len(sides['en'])} English lines")
        par[name] = (sides["az"], sides["en"])
    return evals, par, res


def tokenizer_options(cfg: Config, **over) -> dict:
    """Keyword arguments of :func:`azllm.tokenizer.train_tokenizer` from ``tokenizer`` and the run's seed."""
    opts = cfg.tokenizer.model_dump(exclude={"max_bytes_per_file", "sweep"})
    return {**opts, "seed": cfg.seed, **over}


def sweep_options(cfg: Config) -> list[dict]:
    """Every combination of ``tokenizer.sweep``, as :func:`azllm.tokenizer.train_tokenizer` options."""
    sw = cfg.tokenizer.sweep
    return [tokenizer_options(cfg, vocab_size=v, model_type=m, affix_presplit=a)
            for m in sw.model_types for a in sw.affix_presplit for v in sw.vocab_sizes]


def train_tokenizers(cfg: Config, docs: list[str]) -> tuple[dict[str, Path], dict[str, str]]:
    """The sweep, trained (or reused) into ``artifacts/<run>/tokenizers/<variant>``: ``(trained, skipped)``."""
    from .tokenizer import train_sweep

    return train_sweep(docs, artifacts_dir(cfg) / "tokenizers", sweep_options(cfg))


def baselines(cfg: Config, names: list[str] | None = None) -> dict:
    """Every baseline tokenizer of the params (or those in ``names``): its local ``path`` (under the data root)
    when it exists, else its ``hub`` id; a ``tiktoken`` entry reads tiktoken's cache from ``path``. A missing one
    raises."""
    from .tokenizer import TokenizerError, load_tokenizer

    unknown = sorted(set(names or []) - set(cfg.baselines))
    if unknown:
        raise TokenizerError(f"no baseline named {unknown} in the params; baselines: {sorted(cfg.baselines)}")
    root, out = data_root(cfg), {}
    for name, entry in cfg.baselines.items():
        if names is not None and name not in names:
            continue
        local = None
        if entry.path:
            p = Path(os.path.expanduser(entry.path))
            p = root / p if not p.is_absolute() and root is not None else p
            local = p if p.is_absolute() and p.exists() else None
        if entry.tiktoken:
            spec, cache = f"tiktoken:{entry.tiktoken}", local
        elif local is not None or entry.hub:
            spec, cache = str(local) if local is not None else entry.hub, None
        else:
            raise TokenizerError(f"baseline tokenizer {name!r} not found: path {entry.path!r} does not exist under "
                                 f"data root {root} and no hub id is given")
        try:
            out[name] = load_tokenizer(spec, name=name, tiktoken_cache=cache)
        except TokenizerError:
            raise
        except Exception as e:
            raise TokenizerError(f"baseline {name!r} ({spec}) could not be loaded: {type(e).__name__}: {e}") from e
    return out


# ---------------------------------------------------------------------------------- tokenizer and token files

def main_tokenizer(cfg: Config, docs: list[str] | None = None):
    """The run's tokenizer (token files, model): ``tokens.tokenizer`` when set (any spec of
    :func:`azllm.tokenizer.load_tokenizer`, relative paths under the data root), else trained (or reused) with the
    ``tokenizer`` options on :func:`training_source` into ``artifacts/<run>/tokenizer``. Pass ``docs`` (the
    training source's documents) to avoid reading the corpus again."""
    from .tokenizer import load_tokenizer, train_tokenizer

    spec = cfg.tokens.tokenizer
    if spec:
        root = data_root(cfg)
        p = Path(os.path.expanduser(spec))
        if not p.is_absolute() and root is not None and (root / p).exists():
            spec = str(root / p)
        return load_tokenizer(spec)
    if docs is None:
        docs = azdata.iter_documents(training_source(cfg))
    folder = train_tokenizer(docs, artifacts_dir(cfg) / "tokenizer", **tokenizer_options(cfg))
    return load_tokenizer(folder, name=f"{cfg.run_name}-main")


def tokens_dir(cfg: Config) -> Path:
    """Where the run's token files go: ``tokens.dir`` or ``artifacts/<run>/tokens``."""
    return Path(cfg.tokens.dir).expanduser().resolve() if cfg.tokens.dir else artifacts_dir(cfg) / "tokens"


def token_files(cfg: Config, tokenizer, progress: bool = True) -> dict:
    """:func:`corpus_source` encoded into ``train.bin`` / ``val.bin`` (:func:`azllm.tokens.encode_source`)."""
    from .tokens import encode_source

    t = cfg.tokens
    return encode_source(corpus_source(cfg), tokenizer, tokens_dir(cfg), val_fraction=t.val_fraction,
                         seed=t.split_seed, num_workers=t.num_workers, chunk_docs=t.chunk_docs, progress=progress)


def dev_token_files(cfg: Config, tokenizer) -> dict[str, Path]:
    """Each ``data.eval`` set, whole, in its own token file (``artifacts/<run>/tokens_dev/<name>``)."""
    from .tokens import encode_source

    return {name: encode_source(resolve(cfg, spec), tokenizer, artifacts_dir(cfg) / "tokens_dev" / name,
                                val_fraction=0.0, seed=0, progress=False)["train"]
            for name, spec in cfg.data.eval.items()}


def prepare_data(cfg: Config, *, progress: bool = True) -> dict:
    """The run's tokenizer and token files: ``{"tokenizer": Tok, "train", "val", "dev": {name: path}, "encode"}``."""
    tok = main_tokenizer(cfg)
    res = token_files(cfg, tok, progress=progress)
    return {"tokenizer": tok, "train": res["train"], "val": res["val"], "dev": dev_token_files(cfg, tok),
            "encode": {k: v for k, v in res.items() if isinstance(v, (int, float, str, bool))}}


# ---------------------------------------------------------------------------------------------------- train

def run_key(cfg: Config, method: str, base, max_steps: int, lr: float, tokenizer, files: dict) -> str:
    """Everything that shapes a training run, hashed: its output folder's name and its results' key."""
    from .tokens import read_header

    off = {"fsdp", "fsdp_config"} if not cfg.train.fsdp else set()  # FSDP checkpoints differ: a run of its own
    train = cfg.train.model_dump(exclude={"resume", "compare", "compare_steps", "compare_lr", "generate",
                                          "report_to", *off})
    return json_hash({"model": cfg.model.model_dump(), "train": train, "method": method,
                      "base": str(base) if base else None, "max_steps": max_steps, "lr": lr, "seed": cfg.seed,
                      "tokenizer": tokenizer.fingerprint,
                      "data": {k: read_header(v).get("key") for k, v in files.items()}}, n=12)


def fit_base(cfg: Config, tokenizer, base: str | os.PathLike, dtype):
    """A pretrained base fitted to the run's tokenizer: ``(model, source, new_ids)``.

    - an azllm model folder trained with this very tokenizer: as it is;
    - a tokenizer that extends the base's (``azllm_vocab.json`` of :func:`azllm.vocab.extend_tokenizer`): base rows
      kept, new rows initialised (``model.swap_init``), ``new_ids`` = the appended ids;
    - any other tokenizer: swapped in (every row new).
    The base's tokenizer is ``model.base_tokenizer``, else the one an azllm model records, else the base itself.
    """
    import json

    from transformers import AutoModelForCausalLM

    from . import model as azmodel

    meta_path = Path(base) / "azllm_model.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=dtype, trust_remote_code=False,
                                                 use_safetensors=True)
    if meta.get("tokenizer") == tokenizer.fingerprint:
        return model, f"azllm model {base}", []
    base_tok = cfg.model.base_tokenizer or meta.get("tokenizer_path") or str(base)
    init = cfg.model.swap_init
    if tokenizer.path and (Path(tokenizer.path) / "azllm_vocab.json").is_file():
        counts = azmodel.extend_embeddings(model, base_tok, tokenizer, init=init)
        return model, f"base {base}, vocabulary extended ({init} init)", list(range(counts["kept"],
                                                                                      tokenizer.vocab_size))
    azmodel.swap_tokenizer_embeddings(model, base_tok, tokenizer, init=init)
    return model, f"base {base}, tokenizer swapped ({init} init)", list(range(tokenizer.vocab_size))


def build_model(cfg: Config, tokenizer, method: str, base: str | os.PathLike | None = None):
    """The model a run trains: from scratch (``model.preset``) or a base fitted to the tokenizer (kept, extended or
    swapped, :func:`fit_base`); Liger applied; quantized for QLoRA; LoRA wrapped, with the rows of a changed
    vocabulary trainable (``model.new_rows``). Returns ``(model, info)`` with ``info = {"method", "liger",
    "parameters", "source", "new_rows"}`` (``new_rows`` says which mechanism trains the new rows, if any)."""
    import torch

    from . import lora, model as azmodel
    from .utils import torch_dtype

    M = cfg.model
    dtype = torch_dtype(M.dtype)
    base = base or M.base
    new_ids: list[int] = []
    if base is None:
        model = azmodel.build_model(azmodel.model_config(M.preset, tokenizer.vocab_size, **M.config), dtype=dtype,
                                    seed=cfg.seed)
        source = f"random init, preset {M.preset}"
    else:
        model, source, new_ids = fit_base(cfg, tokenizer, base, dtype)
    if model.config.vocab_size != tokenizer.vocab_size:
        raise ValueError(f"model vocab {model.config.vocab_size} != tokenizer vocab {tokenizer.vocab_size}")
    liger = azmodel.apply_liger(model, M.liger.kernels())
    if method == "qlora":
        q = M.quant
        model = lora.quantize_model(model, bits=q.bits, double_quant=q.double_quant, quant_type=q.quant_type,
                                    compute_dtype=torch_dtype(q.compute_dtype))
        if liger["applied"]:  # quantize_model reloads the model: patch the new instance
            liger = azmodel.apply_liger(model, liger["applied"])
    rows = f"{len(new_ids)} new rows: trained with the model" if new_ids else "none"
    if method in ("lora", "qlora"):
        L = M.lora
        how = M.new_rows if M.new_rows != "auto" else ("full" if len(new_ids) >= tokenizer.vocab_size else "tokens")
        rows = f"{len(new_ids)} new rows: {how}" if new_ids else "none"
        torch.manual_seed(cfg.seed)
        model = lora.apply_lora(model, r=L.r, alpha=L.alpha, dropout=L.dropout, use_rslora=L.use_rslora,
                                target_modules=L.target_modules or "all-linear", kbit=(method == "qlora"),
                                gradient_checkpointing=cfg.train.gradient_checkpointing,
                                liger_flce="fused_linear_cross_entropy" in liger["applied"],
                                new_token_ids=new_ids, new_rows=how)
    return model, {"method": method, "liger": liger, "parameters": azmodel.count_parameters(model),
                   "source": source, "new_rows": rows}


def distributed_guard(cfg: Config, env: dict | None = None) -> None:
    """Refuse known-bad combinations of the launch (read from accelerate's environment) and the params, before
    anything is built: Liger's fused linear cross-entropy under DeepSpeed ZeRO-3 reads an lm_head weight that
    ZeRO-3 has sharded away (linkedin/Liger-Kernel issues, huggingface/trl#3368)."""
    env = os.environ if env is None else env
    zero3 = env.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true" and env.get(
        "ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3"
    if zero3 and cfg.model.liger.fused_linear_cross_entropy:
        raise ValueError("model.liger.fused_linear_cross_entropy under DeepSpeed ZeRO-3: the kernel reads the "
                         "sharded lm_head weight directly and would compute a wrong loss. Use ZeRO-2 or FSDP "
                         "(accelerate/deepspeed_zero2.yaml, accelerate/fsdp.yaml), or switch the kernel off.")


def train(cfg: Config, data: dict, *, method: str | None = None, base: str | os.PathLike | None = None,
          max_steps: int | None = None, lr: float | None = None, output_dir: str | os.PathLike | None = None,
          resume: bool | None = None, callbacks=(), progress: bool = True) -> dict:
    """Train one model on :func:`prepare_data`'s files (``method`` / ``max_steps`` / ``lr`` default to ``train``,
    ``base`` to ``model.base``); a finished identical run is returned as is. Output folder:
    ``artifacts/<run>/train/<method>-<key>``. Returns :func:`azllm.train.run_training`'s results."""
    from . import train as azt
    from .utils import seed_everything

    distributed_guard(cfg)
    T = cfg.train
    method = method or T.method
    max_steps = int(max_steps or T.max_steps)
    lr = float(lr if lr is not None else T.lr)
    resume = T.resume if resume is None else resume
    tok = data["tokenizer"]
    key = run_key(cfg, method, base, max_steps, lr, tok, {"train": data["train"], "val": data["val"]})
    out = Path(output_dir) if output_dir else artifacts_dir(cfg) / "train" / f"{method}-{key}"
    done = azt.finished_result(out, key) if resume else None
    if done is not None:
        return done
    seed_everything(cfg.seed)
    model, info = build_model(cfg, tok, method, base=base)
    evals = {"val": data["val"], **{k: v for k, v in data["dev"].items() if T.dev_sets is None or k in T.dev_sets}}
    return azt.run_training(
        model, tokenizer=tok, train_file=data["train"], eval_files=evals, output_dir=out, key=key, info=info,
        block_size=T.block_size, batch_size=T.batch_size, grad_accum=T.grad_accum, max_steps=max_steps, lr=lr,
        min_lr_ratio=T.min_lr_ratio, warmup_steps=T.warmup_steps, weight_decay=T.weight_decay, betas=T.betas,
        grad_clip=T.grad_clip, optimizer=T.optimizer, precision=T.precision,
        gradient_checkpointing=T.gradient_checkpointing, eval_steps=T.eval_steps, eval_max_tokens=T.eval_max_tokens,
        eval_batch_size=T.eval_batch_size, logging_steps=T.logging_steps, save_steps=T.save_steps,
        save_total_limit=T.save_total_limit, resume=resume, untimed_steps=T.untimed_steps, seed=cfg.seed,
        eval_on_start=T.eval_on_start, rows_only_steps=T.rows_only_steps if method != "full" else 0,
        report_to=tuple(T.report_to), fsdp=T.fsdp, fsdp_config=T.fsdp_config,
        callbacks=callbacks, progress=progress)


def train_method(job: dict) -> dict:
    """Fresh-process entry (:func:`azllm.bench.process.run_fresh`) of one training run: ``job`` holds ``params``
    (a config as :meth:`Config.to_dict`) and ``method`` / ``base`` / ``max_steps`` / ``lr`` / ``output_dir``.
    Returns the JSON results of :func:`train`."""
    cfg = Config.model_validate(job["params"])
    r = train(cfg, prepare_data(cfg, progress=False), method=job.get("method"), base=job.get("base"),
              max_steps=job.get("max_steps"), lr=job.get("lr"), output_dir=job.get("output_dir"), progress=False)
    return {k: v for k, v in r.items() if k not in ("model", "trainer")}


# ------------------------------------------------------------------------------------------- measurements

def encoder_benchmark(cfg: Config, tokenizer, out_json: str | os.PathLike | None = None) -> dict:
    """:func:`azllm.bench.encoder.benchmark` with ``tokens.benchmark`` on ``data.train``. ``quick``: one round,
    50 KB per file unless ``max_bytes_per_file``, 3 training steps. Work files: ``artifacts/<run>/tokens_bench``."""
    from .bench.encoder import benchmark
    from .tokens import TokenFileError

    b = cfg.tokens.benchmark
    spec = tokenizer.path or cfg.tokens.tokenizer
    if not spec:
        raise TokenFileError(f"tokenizer {tokenizer.name!r} has no path that a benchmark process could load; set "
                             "tokens.tokenizer to a folder, a file or a tiktoken name")
    cap = b.max_bytes_per_file if b.max_bytes_per_file is not None else (50_000 if b.quick else None)
    resolved = resolve(cfg, cfg.data.train, **({"max_bytes_per_file": cap} if cap is not None else {}))
    return benchmark(resolved, spec, artifacts_dir(cfg) / "tokens_bench", scale=b.scale,
                     rounds=1 if b.quick else b.rounds, batch_size=b.batch_size, block_size=b.block_size,
                     train_steps=3 if b.quick else 10, out_json=out_json)


def _benchmark_ids(cfg: Config, work: Path, n_tokens: int) -> tuple[Path, int, str]:
    """The ids every variant of the training benchmark trains on (``benchmark.data``)."""
    from .bench.training import corpus_ids, synthetic_ids
    from .tokenizer import load_tokenizer, train_tokenizer

    B = cfg.benchmark
    V = int(B.vocab_size or cfg.tokenizer.vocab_size)
    if B.data == "synthetic":
        return synthetic_ids(work, V, n_tokens, cfg.seed)
    caps = [b for b in (cfg.data.train.max_bytes, B.corpus_bytes) if b]
    resolved = resolve(cfg, cfg.data.train, max_bytes=min(caps) if caps else None)
    docs = list(azdata.iter_documents(resolved))
    folder = train_tokenizer(docs, work / f"tok-{V}", vocab_size=V, model_type=cfg.tokenizer.model_type,
                             seed=cfg.seed, num_threads=cfg.tokenizer.num_threads)
    return corpus_ids(docs, work, load_tokenizer(folder), n_tokens, resolved.describe())


def benchmark_job(cfg: Config, ids_path: str | os.PathLike, vocab_size: int) -> dict:
    """The plain job every variant of the training benchmark starts from (``benchmark`` section; the variant is
    added by :func:`azllm.bench.training.run_variants`)."""
    B = cfg.benchmark
    return {"preset": B.preset, "model": dict(B.model), "vocab_size": vocab_size, "batch": B.batch_size,
            "seq": B.seq_len, "untimed_steps": B.untimed_steps, "steps": B.steps, "windows": B.windows, "lr": B.lr,
            "seed": cfg.seed, "device": B.device, "threads": B.threads, "ids_path": str(ids_path),
            "mem_cap_mb": B.mem_cap_mb, "lora": B.lora.model_dump()}


def benchmark_variant(cfg: Config, name: str):
    """A variant name of the benchmark as a :class:`azllm.memory.Variant` with the section's dtype and LoRA."""
    from . import memory as mem

    B = cfg.benchmark
    return mem.parse_variant(name, dtype=B.dtype, lora_r=B.lora.r, lora_dropout=B.lora.dropout)


def training_benchmark(cfg: Config, out_dir: str | os.PathLike | None = None) -> dict:
    """Every variant of ``benchmark.variants`` in fresh processes, and the OOM probe: ``{"config", "tokens",
    "device", "batch", "seq", "results", "oom_probe"}``, also written to ``<out_dir>/benchmark.json``."""
    from .bench import training as bt
    from .utils import atomic_write_json

    B = cfg.benchmark
    work = artifacts_dir(cfg) / "bench"
    work.mkdir(parents=True, exist_ok=True)
    need = bt.tokens_needed(untimed_steps=B.untimed_steps, windows=B.windows, steps=B.steps, seq_len=B.seq_len,
                            batch_sizes=[B.batch_size] + (B.oom_probe.batches if B.oom_probe.variant else []))
    ids_path, V, desc = _benchmark_ids(cfg, work, need)
    shape, device = bt.model_shape(B.preset, V, B.model), bt.resolve_device(B.device)
    base_job = benchmark_job(cfg, ids_path, V)
    results = bt.run_variants([benchmark_variant(cfg, n) for n in B.variants], base_job, rounds=max(1, B.rounds),
                              timeout_s=B.timeout_s, shape=shape, device=device)
    out = {"config": shape, "tokens": desc, "device": device, "batch": B.batch_size, "seq": B.seq_len,
           "results": results}
    if B.oom_probe.variant:
        out["oom_probe"] = bt.oom_probe(benchmark_variant(cfg, B.oom_probe.variant), base_job,
                                        cap_mb=B.oom_probe.cap_mb, batches=B.oom_probe.batches,
                                        timeout_s=B.timeout_s, shape=shape, device=device)
    if out_dir is not None:
        atomic_write_json(Path(out_dir) / "benchmark.json", out)
    return out


def fit_models(cfg: Config) -> tuple[dict, list]:
    """The models and variants of the fit planner (``benchmark.fit``): ``({name: LlamaConfig}, [Variant])``."""
    from . import memory as mem
    from .model import model_config

    F, B = cfg.benchmark.fit, cfg.benchmark
    V = int(F.vocab_size or cfg.tokenizer.vocab_size)
    models = {p: model_config(p, V) for p in F.presets}
    for name, over in F.configs.items():
        over = dict(over)
        models[name] = model_config(over.pop("preset", "1b"), int(over.pop("vocab_size", V)), **over)
    variants = [mem.parse_variant(n, dtype=F.dtype, lora_r=B.lora.r, lora_dropout=B.lora.dropout)
                for n in F.variants]
    return models, variants
