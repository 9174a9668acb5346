"""GGUF files of the study's models, proven (notebook 08, ``azllm deploy MODEL_FOLDER``).

Reads ``deploy`` (and ``data`` for the text the checks read, ``sft`` for held-out instructions):

- :func:`model_folders`: the folders of ``deploy.models`` (``student`` / ``baseline``: notebook 08's students,
  :func:`azllm.recipes.distill.run_distill`; ``teacher``; ``sft``: notebook 07's export; or a folder);
- :func:`parity_sets`: every line of the evaluation sets and of both sides of the parallel pairs (FLORES-200 dev
  az and en, X-WMT), tokenized by llama.cpp and by the Hugging Face tokenizer;
- :func:`new_ids`: the ids a base tokenizer did not have (an extension's ``azllm_vocab.json``; an SFT template's
  added role tokens), so parity is reported apart for lines that hold them;
- :func:`deploy_model`: :func:`azllm.deploy.deploy` of one folder into ``artifacts/<run>/deploy/<name>/``, cached
  by the folder's weights and the settings (a rerun returns ``deploy.json`` as it is);
- :func:`speed_rows`: prompt and generation tokens/s and peak RSS of the Q4 file (llama.cpp, ``deploy.threads``
  threads) against transformers on the same CPU, each in a fresh process;
- :func:`answers`: greedy answers of the Q4 file beside the PyTorch model's, to held-out instructions (a chat
  model) or to ``train.generate.prompts`` (a language model);
- :func:`run_deploy`: all of them.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..config import Config
from ..deploy import DeployRecord
from .paths import Paths
from .sources import resolve

__all__ = [
    "model_folders",
    "parity_sets",
    "quality_texts",
    "new_ids",
    "deploy_model",
    "speed_rows",
    "answers",
    "run_deploy",
]


def model_folders(cfg: Config, distilled: dict | None = None) -> dict[str, str]:
    """``{name: folder}`` of ``deploy.models``; ``distilled``: :func:`azllm.recipes.distill.run_distill`'s result
    when the caller has it, else the ``distill`` and ``sft`` stages' outputs (:func:`azllm.recipes.stages.require`:
    found by their markers, or built once)."""
    from . import stages

    out = {}
    for name in cfg.deploy.models:
        if name in ("student", "baseline", "teacher"):
            if distilled is None:
                done = stages.require(cfg, "distill")
                distilled = {"teacher": {"folder": done["teacher"]}, "exports": done["exports"]}
            key = {"student": "kd", "baseline": "ce"}.get(name)
            out[name] = distilled["teacher"]["folder"] if name == "teacher" else distilled["exports"][key]
        elif name == "sft":
            out[name] = stages.require(cfg, "sft")["artifact"]
        else:
            out[Path(name).name] = name
    return out


def _lines(cfg: Config, source) -> list[str]:
    from ..data import iter_documents

    return [x for x in iter_documents(resolve(cfg, source)) if x.strip()]


def parity_sets(cfg: Config) -> dict[str, list[str]]:
    """``{name: lines}`` of ``deploy.parity_sets`` (None: every ``data.eval`` set and both sides of every
    ``data.parallel`` pair)."""
    want = cfg.deploy.parity_sets
    out = {}
    for name, src in cfg.data.eval.items():
        if want is None or name in want:
            out[name] = _lines(cfg, src)
    for name, pair in cfg.data.parallel.items():
        if want is None or name in want:
            for side in ("az", "en"):
                out.setdefault(f"{name}_{side}", _lines(cfg, getattr(pair, side)))
    return out


def quality_texts(cfg: Config) -> list[str]:
    """The first ``deploy.quality_lines`` lines of the first Azerbaijani eval set: the text each quantization is
    compared with F16 on."""
    first = next(iter(cfg.data.eval.values()))
    return _lines(cfg, first)[: cfg.deploy.quality_lines]


def new_ids(folder: str | Path, base_tokenizer: str | Path | None) -> list[int] | None:
    """Ids of ``folder``'s tokenizer whose piece the study's base tokenizer lacks (an extension's new pieces, an
    SFT template's role tokens; every id after a swap); None without a base tokenizer."""
    from transformers import AutoTokenizer

    if base_tokenizer is None:
        return None
    base = set(AutoTokenizer.from_pretrained(str(base_tokenizer)).get_vocab())
    return sorted(i for piece, i in AutoTokenizer.from_pretrained(str(folder)).get_vocab().items() if piece not in base)


def _base_tokenizer(cfg: Config) -> str | None:
    """The folder of the adaptation study's base tokenizer (what "new" tokens are new to; the study notebook 08
    distils from has made it)."""
    from .adapt import run_study

    tok = run_study(cfg, train=False).base_tok
    return tok.path if tok is not None and tok.path and Path(tok.path).is_dir() else None


def deploy_model(
    cfg: Config,
    name: str,
    folder: str | Path,
    *,
    out_dir: str | Path | None = None,
    base_tokenizer: str | Path | None = None,
) -> DeployRecord:
    """:func:`azllm.deploy.deploy` of ``folder`` into ``out_dir`` (default ``artifacts/<run>/deploy/<name>/``) with
    the run's parity sets and quality text, parity split by the tokens ``base_tokenizer`` lacks (when given);
    returned from its ``deploy.json`` when the folder's weights and the settings are the same."""
    from ..deploy import deploy
    from ..utils import json_hash, weights_id

    d = cfg.deploy
    out = Path(out_dir) if out_dir else Paths.of(cfg).deploy / name
    sets, texts = parity_sets(cfg), quality_texts(cfg)
    key = json_hash(
        {
            "weights": weights_id(folder),
            "quants": d.quants,
            "sets": sets,
            "texts": texts,
            "pre": d.pre_tokenizer,
            "base_tokenizer": str(base_tokenizer),
        }
    )
    record = out / "deploy.json"
    if record.is_file() and json.loads(record.read_text()).get("key") == key:
        return json.loads(record.read_text())
    res = deploy(
        folder,
        out,
        quants=tuple(d.quants),
        parity_sets=sets,
        eval_texts=texts,
        new_ids=new_ids(folder, base_tokenizer),
        threads=d.threads,
        pre_tokenizer=d.pre_tokenizer,
    )
    from ..utils import atomic_write_json

    res: DeployRecord = {**res, "key": key, "name": name}
    atomic_write_json(record, res)
    return res


def smallest_file(record: DeployRecord) -> str:
    """The name of a deployed model's smallest file (``Q4_K_M`` by default)."""
    return min(record["files"], key=lambda q: record["files"][q]["size_bytes"])


def speed_rows(cfg: Config, record: DeployRecord) -> list[dict]:
    """Prompt and generation tokens/s and peak RSS of each GGUF file and of transformers (fresh processes)."""
    from ..bench.gguf import hf_speed, speed

    t = cfg.deploy.threads
    rows = [{"runtime": "transformers (fp32)", **hf_speed(record["folder"], threads=t)}]
    for q, rec in record["files"].items():
        rows.append({"runtime": f"llama.cpp {q}", "size_mb": rec["size_bytes"] / 1e6, **speed(rec["path"], threads=t)})
    return rows


def _prompts(cfg: Config, name: str, folder: str) -> tuple[list[str], bool]:
    """Held-out instructions for a chat model (``sft``, or a model distilled from it), else
    ``train.generate.prompts`` to continue."""
    n = cfg.deploy.generate_lines
    if name == "sft" or (name in ("student", "baseline", "teacher") and cfg.distill.teacher == "sft"):
        from transformers import AutoTokenizer

        from .conversations import sft_data

        held = sft_data(cfg, AutoTokenizer.from_pretrained(folder))["held_out"][:n]
        return [next(m["content"] for m in c["messages"] if m["role"] == "user") for c in held], True
    return list(cfg.train.generate.prompts[:n]), False


def answers(cfg: Config, name: str, record: DeployRecord) -> list[dict]:
    """Greedy answers of the smallest GGUF file (llama.cpp) beside the PyTorch model's to the same prompts, both
    from the one engine (:mod:`azllm.engine`), 48 new tokens, no repetition penalty."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .. import engine

    folder = record["folder"]
    prompts, chat = _prompts(cfg, name, folder)
    if not prompts:
        return []
    asked = [[{"role": "user", "content": p}] if chat else p for p in prompts]
    greedy = engine.Decoding(max_new_tokens=48)
    gguf = engine.llama_cpp_engine(record["files"][smallest_file(record)]["path"], threads=cfg.deploy.threads)
    torch_model = AutoModelForCausalLM.from_pretrained(folder).eval()
    torch_engine = engine.torch_engine(torch_model, AutoTokenizer.from_pretrained(folder), batch_size=1)
    got = zip(gguf.complete(asked, greedy), torch_engine.complete(asked, greedy))
    return [
        {"prompt": p, "llama_cpp": g["text"], "pytorch": t["text"], "chat": chat} for p, (g, t) in zip(prompts, got)
    ]


def run_deploy(cfg: Config, distilled: dict | None = None) -> dict[str, DeployRecord]:
    """Every model of ``deploy.models``: ``{name: deploy.json's record (+ "speed", "answers")}``."""
    out, base_tok = {}, _base_tokenizer(cfg)
    for name, folder in model_folders(cfg, distilled).items():
        rec = deploy_model(cfg, name, folder, base_tokenizer=base_tok)
        rec["speed"] = speed_rows(cfg, rec) if cfg.deploy.speed else []
        rec["answers"] = answers(cfg, name, rec)
        out[name] = rec
    return out


def parity_rows(records: dict[str, DeployRecord]) -> list[dict]:
    """One row per deployed model and parity set: lines, lines whose ids are equal, their share, and the same for
    the lines that hold a new token and those that hold none."""
    rows = []
    for name, rec in records.items():
        for s, p in rec["parity"]["sets"].items():
            rows.append(
                {
                    "model": name,
                    "set": s,
                    "lines": p["lines"],
                    "equal": p["equal"],
                    "share": p["share"],
                    "with_new_lines": p.get("with_new", {}).get("lines"),
                    "with_new_share": p.get("with_new", {}).get("share"),
                    "without_new_lines": p.get("without_new", {}).get("lines"),
                    "without_new_share": p.get("without_new", {}).get("share"),
                }
            )
    return rows


def mismatches(records: dict[str, DeployRecord]) -> list[dict]:
    """Every tokenizer mismatch shown by :func:`azllm.deploy.tokenizer_parity` (none when parity is 100%)."""
    return [
        {"model": name, "set": s, **m}
        for name, rec in records.items()
        for s, p in rec["parity"]["sets"].items()
        for m in p["mismatches"]
    ]


def _types(by_type: dict) -> str:
    return ", ".join(f"{t} {r['tensors']}" for t, r in by_type.items())


def quant_rows(records: dict[str, DeployRecord]) -> list[dict]:
    """One row per deployed model and file: size, real bits per weight, the tensor types it holds, and against F16
    on Azerbaijani text: mean KL divergence, perplexity ratio and same-top-1 share with their standard errors (the
    F16 row: the largest logit difference and top-1 agreement against the PyTorch model)."""
    rows = []
    for name, rec in records.items():
        for q, f in rec["files"].items():
            qual = rec["quality"].get(q, {})
            rows.append(
                {
                    "model": name,
                    "file": q,
                    "size_mb": f["size_bytes"] / 1e6,
                    "bits_per_weight": f["bits_per_weight"],
                    "tensor_types": _types(f["by_type"]),
                    "mean_kld": qual.get("mean_kld"),
                    "kld_se": qual.get("kld_se"),
                    "ppl_ratio": qual.get("ppl_ratio"),
                    "ppl_ratio_se": qual.get("ppl_ratio_se"),
                    "same_top1": qual.get("same_top1"),
                    "same_top1_se": qual.get("same_top1_se"),
                    "vs_pytorch_max_abs_diff": rec["logits"]["max_abs_diff"] if q == "F16" else None,
                    "vs_pytorch_top1": rec["logits"]["top1_agreement"] if q == "F16" else None,
                    "same_tokenizer": f.get("same_tokenizer", True),
                }
            )
    return rows


def size_quality_points(
    cfg: Config, student_rows: list[dict], records: dict[str, DeployRecord], names: dict[str, str]
) -> list[dict]:
    """Points of the size-vs-quality plot: every model of the distillation study at its fp32 weights (its measured
    Azerbaijani bits per byte) and every deployed file of those models at its size, its bits per byte estimated
    from the file's measured perplexity ratio against F16 on Azerbaijani text
    (``bpb_F16 + ln(ppl ratio) / ln 2 x tokens per byte``). ``names``: deployed name -> the study's model label."""
    import math

    texts = quality_texts(cfg)
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    by_label = {r["model"]: r for r in student_rows}
    pts = [
        {"model": r["model"], "file": "fp32", "size_mb": r["weights_mb"], "az_bpb": r["az_bpb"], "estimated": False}
        for r in student_rows
        if r["weights_mb"] is not None
    ]
    for name, rec in records.items():
        row = by_label.get(names.get(name, ""))
        if row is None:
            continue
        for q, f in rec["files"].items():
            qual = rec["quality"].get(q)
            shift = math.log(qual["ppl_ratio"]) / math.log(2) * qual["positions"] / nbytes if qual else 0.0
            pts.append(
                {
                    "model": row["model"],
                    "file": q,
                    "size_mb": f["size_bytes"] / 1e6,
                    "az_bpb": row["az_bpb"] + shift,
                    "estimated": q != "F16",
                }
            )
    return pts


def summary(records: dict[str, DeployRecord]) -> dict:
    """The index's answer: the smallest file of the first deployed model (:func:`smallest_file`), its size and
    quality against F16, and the tokenizer parity over every line of every deployed model."""
    if not records:
        return {}
    name, rec = next(iter(records.items()))
    file = smallest_file(rec)
    lines = sum(r["parity"]["all"]["lines"] for r in records.values())
    equal = sum(r["parity"]["all"]["equal"] for r in records.values())
    return {
        "model": name,
        "file": file,
        "size_mb": rec["files"][file]["size_bytes"] / 1e6,
        "f16_size_mb": rec["files"]["F16"]["size_bytes"] / 1e6,
        "mean_kld": rec["quality"].get(file, {}).get("mean_kld"),
        "parity_lines": lines,
        "parity_share": equal / lines if lines else None,
    }
