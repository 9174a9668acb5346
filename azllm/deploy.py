"""Deployment for llama.cpp: a Hugging Face folder -> GGUF F16 -> Q8_0 / Q4_K_M, checked to be still the model:
:func:`deploy` = :func:`check_model_folder`, :func:`convert`, :func:`quantize`, :func:`tokenizer_parity`,
:func:`azllm.gguf_quality.logit_check`, :func:`azllm.gguf_quality.quant_quality`, :func:`bits_per_weight` ->
``deploy.json``; :func:`speed` apart.

- **llama.cpp's own converter** (llama-cpp-python 0.3.36's sdist, :func:`converter_path`) runs in a child process
  that first settles the **pre-tokenizer** (:func:`choose_pre_tokenizer`): a hash llama.cpp knows is used as it is;
  an unknown one only by the caller's name or by :data:`PRE_TOKENIZER_REGISTRY` (never guessed), and the child
  checks that llama.cpp's own detection agrees. A registry entry needs a known tokenizer's loaded ``normalizer`` and
  ``pre_tokenizer`` **and** its ids kept: a plain ``ByteLevel`` is GPT-2's too, so the sections alone name nothing.
- **SentencePiece** takes the converter's ``tokenizer.model`` path (real scores): azllm's ``sp.model`` is shown to it
  under that name, else it reads ``tokenizer.json`` with every score -1000 (measured: 1% of FLORES lines equal).
- **Atomic**: every file is written under a temporary name beside it and renamed; a failed, timed-out or
  interrupted step leaves nothing (the converter's process group is killed); :func:`deploy` swaps its folder in.
- **Parity**: llama.cpp's ids (``special=True``: HF's ``encode`` matches special tokens in text too) against
  ``AutoTokenizer(folder).encode(text, add_special_tokens=False)``. **Quality**: llama.cpp's ``--kl-divergence``
  terms in float64 from the logits, every position of each text (llama.cpp: each chunk's second half). llama.cpp
  logs into a list, never to stderr; its extra buffer types are off (:data:`azllm.gguf_runtime.EXTRA_BUFFERS_ENV`).

Parity short of 100%, explained: transformers 5 loads a ``GPT2Tokenizer`` folder (SmolLM2's) with plain GPT-2
splitting, llama.cpp's ``smollm`` splits digits first (as SmolLM2 was trained): ``"a  2"`` is ``Ġ Ġ 2`` in HF,
``ĠĠ 2`` in llama.cpp (2+ whitespace before a digit only). llama.cpp's SentencePiece has no normalizer: lines with
leading, trailing or double spaces (which azllm's tokenizers strip and collapse) differ, single-spaced text is exact.

SmolLM2-135M-Instruct (the :mod:`azllm.gguf` folder), measured on 2 cores (nice'd, contended: indicative; speed at
load 1.4, 128-token prompt, 32 steps; at load 3-5 llama.cpp fell 5-15x, transformers' steps to 3/s). Parity 400/400
(first 200 FLORES dev lines, az + en); F16 vs PyTorch fp32: top-1 0.997 of 1,268 positions, max logit difference
0.083 (logits up to 35); vs F16 on 20 FLORES az lines (1,248 positions, ± se); convert 8.6 s, deploy() 145 s:

| file              | MB    | bits  | KL(F16 || Q)    | PPL ratio     | same top-1    | prefill/s | gen tok/s | RSS MB |
| F16               | 270.9 | 16.00 | -               | -             | -             | 602       | 56.7      | 332    |
| Q8_0              | 144.8 | 8.51  | 0.0108 ± 0.0003 | 0.998 ± 0.005 | 0.936 ± 0.007 | 638       | 77.8      | 212    |
| Q4_K_M            | 105.5 | 6.17  | 0.124 ± 0.004   | 1.129 ± 0.019 | 0.752 ± 0.012 | 569       | 85.9      | 175    |
| transformers fp32 | 538.1 | 32    | -               | -             | -             | 775       | 30.2      | 1026   |

"Q4_K_M" is Q5_0 in 166 of its 211 matrices (576-wide rows miss Q4_K's 256-blocks: 180 of 272 tensors fell back),
Q8_0 in 15 (the tied embedding, attn_v's Q6_K), Q4_K / Q6_K only in ffn_down (1536 wide): 6.17 bits, not ~4.8.

>>> info = deploy(folder, "artifacts/deploy", parity_sets={"az": az}, eval_texts=az[:20])  # doctest: +SKIP
>>> from azllm.engine import llama_cpp_engine
>>> llama_cpp_engine(info["files"]["Q4_K_M"]["path"]).complete(["Salam! Necəsən?"])  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from hashlib import sha256
from pathlib import Path
from typing import TypedDict

from .gguf_file import read_gguf
from .gguf_runtime import LLAMA_CPP, DeployError, llama_ids, llama_log, require_llama_cpp
from .utils import atomic_write_json, log_stream, replace_dir

__all__ = ["converter_path", "require_llama_cpp", "check_model_folder", "choose_pre_tokenizer", "convert", "quantize"]
__all__ += ["bits_per_weight", "tokenizer_parity"]
__all__ += ["deploy", "DeployRecord", "DeployError", "QUANTS", "PRE_TOKENIZER_REGISTRY", "CONVERTER_ENV"]

Pathish = str | os.PathLike
CONVERTER_ENV = "AZLLM_LLAMA_CPP"
"""Environment variable naming a folder with llama.cpp's ``convert_hf_to_gguf.py``, ``conversion/``, ``gguf-py/``."""

ARCHITECTURES = ("LlamaForCausalLM",)  # what azllm trains and converts
QUANTS = {q: f"LLAMA_FTYPE_MOSTLY_{q}" for q in ("Q8_0", "Q6_K", "Q5_K_M", "Q5_0", "Q4_K_M", "Q4_K_S", "Q4_0")}
"""The types :func:`quantize` makes, by llama.cpp's name -> the ``llama_cpp`` ftype constant."""

_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
_DIGITS = {"type": "Digits", "individual_digits": True}
PRE_TOKENIZER_REGISTRY = (
    {
        "name": "smollm",
        "reference": "SmolLM2 (135M/360M/1.7B, Instruct): 49,152-token byte-level BPE, llama.cpp hash 85505942",
        "normalizer": None,
        "pre_tokenizers": (_BYTE_LEVEL, {"type": "Sequence", "pretokenizers": [_DIGITS, _BYTE_LEVEL]}),
        "base_vocab": (49152, "bee029ab6e02e20cf941d5a91d9ecc5d6eedadd85ff5aa1abb792a3db7f5c345"),
    },
)
"""Unknown hashes mapped on purpose: to ``name`` when the tokenizer as loaded has this ``normalizer``, one of these
``pre_tokenizers`` (SmolLM2's as transformers 5 loads it; as its hub file says) and the reference's first
``base_vocab[0]`` tokens (sha256 of their JSON list), i.e. the reference extended."""


def converter_path(explicit: Pathish | None = None) -> Path:
    """llama.cpp's converter folder: ``explicit``, else ``$AZLLM_LLAMA_CPP``, else ``<venv>/share/azllm/llama.cpp``.

    >>> (converter_path() / "convert_hf_to_gguf.py").is_file()  # doctest: +SKIP
    True
    """
    default = Path(sys.prefix) / "share/azllm/llama.cpp"
    path = Path(explicit or os.environ.get(CONVERTER_ENV) or default)
    if not (path / "convert_hf_to_gguf.py").is_file():
        raise FileNotFoundError(
            f"{path}: no convert_hf_to_gguf.py (llama.cpp's converter). `make venv` puts it at {default}; or run "
            f"`pip download --no-deps --no-binary :all: {LLAMA_CPP}`, extract vendor/llama.cpp/{{convert_hf_to_gguf.py,"
            f"conversion,gguf-py}} from the sdist into one folder and pass it (converter=) or set ${CONVERTER_ENV}"
        )
    return path


def _tokenizer_kind(folder: Path) -> tuple[str, str]:
    """``(kind, the converter's vocab path)``; a DeployError for no tokenizer or one the converter would get wrong."""
    if (folder / "tokenizer.model").is_file() or (folder / "sp.model").is_file():
        model = folder / "tokenizer.model" if (folder / "tokenizer.model").is_file() else folder / "sp.model"
        _refuse_unigram(model)
        return "SentencePiece", "spm" if (folder / "tokenizer.model").is_file() else "spm (sp.model as tokenizer.model)"
    if (folder / "tokenizer.json").is_file():
        tj = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        if tj["model"].get("type") == "BPE" and not tj["model"].get("byte_fallback") and "ByteLevel" in json.dumps(tj):
            return "byte-level BPE", "gpt2"
        raise DeployError(
            f"{folder}: a {tj['model'].get('type')} tokenizer.json without tokenizer.model: llama.cpp's converter "
            "would give every token the score -1000 and lose the merge order; put its SentencePiece model beside it"
        )
    if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        return "byte-level BPE", "gpt2"
    raise DeployError(
        f"{folder}: no tokenizer (tokenizer.json, tokenizer.model, sp.model or vocab.json + merges.txt): copy the "
        "tokenizer's files next to the weights, e.g. azllm.export.copy_tokenizer_files(tokenizer_folder, folder)"
    )


def _refuse_unigram(model: Path) -> None:
    """llama.cpp tokenizes a LLaMA-family SentencePiece model by merging pieces by score, as SentencePiece's BPE
    does; a unigram model's Viterbi segmentation is something else (measured: 0 of 200 FLORES lines alike), so a
    unigram model is refused rather than exported with other ids."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.read_bytes())
    if proto.trainer_spec.model_type == sentencepiece_model_pb2.TrainerSpec.UNIGRAM:
        raise DeployError(
            f"{model}: a SentencePiece unigram model. llama.cpp tokenizes SentencePiece models as BPE (merging pieces"
            " by score), so its token ids would differ from this tokenizer's; train the tokenizer with model_type: bpe"
            " (azllm's default) to deploy it"
        )


def hf_tokenizer(folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def check_model_folder(folder: Pathish) -> dict:
    """What llama.cpp will be given: architecture, vocabulary size, tokenizer kind (byte-level BPE / SentencePiece),
    the converter's vocab path, added tokens, chat template; a DeployError for a folder it would get wrong.

    >>> check_model_folder("artifacts/sft_export")["tokenizer_kind"]  # doctest: +SKIP
    'byte-level BPE'
    """
    folder = Path(folder)
    if (folder / "adapter_config.json").is_file():
        raise DeployError(
            f"{folder} holds an unmerged LoRA adapter (adapter_config.json): llama.cpp needs one plain model; merge "
            "and export it first (azllm.export.export_model(peft_model, tokenizer_folder, out_dir)) and deploy that"
        )
    if not (folder / "config.json").is_file():
        raise DeployError(f"{folder}: no config.json, not a Hugging Face model folder (save_pretrained writes one)")
    cfg = json.loads((folder / "config.json").read_text())
    kind, vocab_path = _tokenizer_kind(folder)
    arch = (cfg.get("architectures") or [cfg.get("model_type")])[0]
    if arch not in ARCHITECTURES:
        raise DeployError(f"{folder}: architecture {arch!r}; azllm.deploy converts {', '.join(ARCHITECTURES)}")
    tok = hf_tokenizer(folder)
    if cfg.get("vocab_size") != len(tok):
        raise DeployError(
            f"{folder}: config.json says vocab_size {cfg.get('vocab_size')} but the tokenizer has {len(tok)} tokens; "
            "the GGUF's token list and the embedding rows must agree: resize the model to its tokenizer "
            "(model.resize_token_embeddings(len(tokenizer)), save_pretrained) or ship the tokenizer it was trained with"
        )
    info = {"architecture": arch, "vocab_size": len(tok), "tokenizer_kind": kind, "converter_vocab": vocab_path}
    info.update(added_tokens=len(tok.get_added_vocab()), chat_template=bool(tok.chat_template))
    return info | {k: cfg.get(k) for k in ("hidden_size", "num_hidden_layers", "tie_word_embeddings")}


def _known_hashes(converter: Path) -> tuple[dict[str, str], str]:
    """The converter's ``{hash: name}`` table and its check text, read from its source (``get_vocab_base_pre``)."""
    import ast

    tree = ast.parse((converter / "conversion" / "base.py").read_text(encoding="utf-8"))
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_vocab_base_pre")
    chktxt, known = None, {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "chktxt":
            chktxt = node.value.value
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            value = getattr(node.test.comparators[0], "value", None)
            names = [a.value.value for a in node.body if isinstance(getattr(a, "value", None), ast.Constant)]
            if isinstance(value, str) and names:
                known[value] = names[-1]  # the converter's ifs run in order: a repeated hash keeps the last name
    if not chktxt or not known:
        raise DeployError(f"{converter}: cannot read llama.cpp's pre-tokenizer table from conversion/base.py")
    return known, chktxt


def _vocab_sha(tj: dict, n: int) -> str | None:
    inv = {i: t for t, i in tj["model"].get("vocab", {}).items()} | {a["id"]: a["content"] for a in tj["added_tokens"]}
    toks = [inv.get(i) for i in range(n)]
    return None if None in toks else sha256(json.dumps(toks, ensure_ascii=False).encode()).hexdigest()


def choose_pre_tokenizer(folder: Pathish, *, pre_tokenizer=None, converter=None) -> dict:
    """``{name, how, hash}``: the llama.cpp pre-tokenizer that converting ``folder`` writes, and why (see the module
    docstring); a DeployError naming the hash when nothing maps it.

    >>> choose_pre_tokenizer("artifacts/extended")["how"]  # doctest: +SKIP
    'registry: SmolLM2 ...'
    """
    folder = Path(folder)
    kind, vocab_path = _tokenizer_kind(folder)
    if vocab_path != "gpt2":
        if pre_tokenizer:
            raise DeployError(f"pre_tokenizer={pre_tokenizer!r}: a {kind} tokenizer has no pre-tokenizer to choose")
        return {"name": "default", "how": f"{kind}: the converter writes 'default' (no hash)", "hash": None}
    known, chktxt = _known_hashes(converter_path(converter))
    tok = hf_tokenizer(folder)
    h, names = sha256(str(tok.encode(chktxt)).encode()).hexdigest(), sorted(set(known.values()))
    if h in known:
        if pre_tokenizer not in (None, known[h]):
            raise DeployError(f"llama.cpp knows this tokenizer (hash {h}) as {known[h]!r}, not {pre_tokenizer!r}")
        return {"name": known[h], "how": "known hash", "hash": h}
    if pre_tokenizer is not None:
        if pre_tokenizer not in names:
            raise DeployError(f"pre_tokenizer={pre_tokenizer!r} is not a name llama.cpp knows: {', '.join(names)}")
        return {"name": pre_tokenizer, "how": "given by the caller", "hash": h}
    tj = json.loads(tok.backend_tokenizer.to_str()) if getattr(tok, "backend_tokenizer", None) else {}
    for entry in PRE_TOKENIZER_REGISTRY:
        if tj.get("normalizer") == entry["normalizer"] and tj.get("pre_tokenizer") in entry["pre_tokenizers"]:
            if _vocab_sha(tj, entry["base_vocab"][0]) == entry["base_vocab"][1]:
                return {"name": entry["name"], "how": f"registry: {entry['reference']}", "hash": h}
    raise DeployError(
        f"{folder}: llama.cpp does not know this tokenizer's pre-tokenizer (hash {h}) and azllm's registry has no "
        "entry for it. Map it on purpose: pass pre_tokenizer=<llama.cpp's name whose splitting equals this "
        "tokenizer's pre_tokenizer> (e.g. 'gpt-2' for a plain ByteLevel one, 'smollm' for SmolLM2's), or add a "
        "tested entry to azllm.deploy.PRE_TOKENIZER_REGISTRY"
    )


def _staged(folder: Path, work: Path) -> Path:
    """``folder`` itself, or a view of it (symbolic links) that shows ``sp.model`` as ``tokenizer.model``."""
    if (folder / "tokenizer.model").is_file() or not (folder / "sp.model").is_file():
        return folder
    (work / folder.name).mkdir()
    for item in folder.iterdir():
        (work / folder.name / item.name).symlink_to(item.resolve())
    (work / folder.name / "tokenizer.model").symlink_to((folder / "sp.model").resolve())
    return work / folder.name


def gguf_fields(path: Path) -> dict:
    """A GGUF's pre-tokenizer, chat template, token count and the sha256 of all its ``tokenizer.*`` metadata."""
    fields = {k: v for k, v in read_gguf(path).fields.items() if k.startswith("tokenizer.")}
    meta = sha256(json.dumps({k: str(v) for k, v in fields.items()}, sort_keys=True).encode()).hexdigest()
    out = {k: fields[k] for k in ("tokenizer.ggml.pre", "tokenizer.chat_template") if k in fields}
    return out | {"n_tokens": len(fields["tokenizer.ggml.tokens"]), "tokenizer_sha256": meta}


def _run_child(cmd: list[str], timeout_s: float, what: str) -> str:
    """Run ``cmd`` in its own process group, killed whole on a timeout or an interrupt; returns its output."""
    import signal

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except BaseException as e:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if isinstance(e, subprocess.TimeoutExpired):
            raise DeployError(f"{what} did not finish in {timeout_s:g} s (killed; nothing written)") from None
        raise
    if proc.returncode != 0:
        raise DeployError(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(out.strip().splitlines()[-15:]))
    return out


def convert(folder, out_file, *, outtype="f16", pre_tokenizer=None, converter=None, timeout_s: float = 1800) -> dict:
    """Convert the model folder into one GGUF file with llama.cpp's converter (see the module docstring); returns
    ``{path, seconds, size_bytes, pre_tokenizer, pre_tokenizer_how, pre_tokenizer_hash, chat_template, ...}``.

    >>> convert("artifacts/sft_export", "artifacts/deploy/model-F16.gguf")["pre_tokenizer"]  # doctest: +SKIP
    'smollm'
    """
    t0, conv, folder, out = time.time(), converter_path(converter), Path(folder), Path(out_file)
    info = check_model_folder(folder)
    choice = choose_pre_tokenizer(folder, pre_tokenizer=pre_tokenizer, converter=conv)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp, work = out.with_name(f".{out.name}.{os.getpid()}.tmp"), Path(tempfile.mkdtemp(prefix="azllm-convert-"))
    try:
        job = {"converter": str(conv), "folder": str(_staged(folder, work)), "outtype": outtype, "outfile": str(tmp)}
        (work / "job.json").write_text(json.dumps({**job, "pre_tokenizer": choice["name"], "how": choice["how"]}))
        log = _run_child([sys.executable, "-m", "azllm.deploy", str(work / "job.json")], timeout_s, "the converter")
        fields, template = gguf_fields(tmp), hf_tokenizer(folder).chat_template
        got = (fields["n_tokens"], fields.get("tokenizer.ggml.pre", "default"))
        if got != (info["vocab_size"], choice["name"]):
            raise DeployError(f"the GGUF has (tokens, pre-tokenizer) {got}, not {info['vocab_size'], choice['name']}")
        if template and fields.get("tokenizer.chat_template") != template:
            raise DeployError("the chat template did not travel (chat_template.jinja needs tokenizer_config.json)")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    res = {"path": str(out), "seconds": round(time.time() - t0, 2), "size_bytes": out.stat().st_size}
    res.update(outtype=outtype, converter_vocab=info["converter_vocab"], chat_template=bool(template))
    res.update(pre_tokenizer=choice["name"], pre_tokenizer_how=choice["how"], pre_tokenizer_hash=choice["hash"])
    return res | {"converter_warnings": [ln for ln in log.splitlines() if ln.startswith("WARNING")][:20]}


def _converter_child(job_path: str) -> int:
    """Inside the child: llama.cpp's converter, its pre-tokenizer detection checked against azllm's decision."""
    import runpy

    job = json.loads(Path(job_path).read_text())
    conv = Path(job["converter"])
    sys.path[:0] = [str(conv), str(conv / "gguf-py")]
    from conversion import base  # llama.cpp's converter package

    detect = base.TextModel.get_vocab_base_pre

    def as_decided(self, tokenizer):
        try:
            found = detect(self, tokenizer)
        except NotImplementedError:
            found = None
        if found != (job["pre_tokenizer"] if job["how"] == "known hash" else None):
            raise RuntimeError(f"azllm decided {job['pre_tokenizer']!r} ({job['how']}); llama.cpp detected {found!r}")
        return job["pre_tokenizer"]

    base.TextModel.get_vocab_base_pre = as_decided
    sys.argv = [
        str(conv / "convert_hf_to_gguf.py"),
        job["folder"],
        "--outtype",
        job["outtype"],
        "--outfile",
        job["outfile"],
    ]
    runpy.run_path(sys.argv[0], run_name="__main__")
    return 0


def quantize(f16_file: Pathish, out_file: Pathish, quant: str, *, threads: int = 2) -> dict:
    """Quantize a GGUF with llama.cpp (``llama_model_quantize``) to ``quant``, one of :data:`QUANTS`; returns
    ``{path, quant, seconds, size_bytes, fallback}`` (fallback: llama.cpp's count of tensors whose rows do not fit
    the type's blocks and take its fallback type, e.g. SmolLM2's 576-wide rows under Q4_K).

    >>> quantize("model-F16.gguf", "model-Q4_K_M.gguf", "Q4_K_M")["fallback"]  # doctest: +SKIP
    '180 of 272 tensors'
    """
    import ctypes
    import re

    if quant not in QUANTS:
        raise DeployError(f"unknown quantization {quant!r}; known: {', '.join(QUANTS)}")
    api, src, out = require_llama_cpp(), Path(f16_file), Path(out_file)
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such GGUF file")
    tmp, params = out.with_name(f".{out.name}.{os.getpid()}.tmp"), api.llama_model_quantize_default_params()
    params.ftype, params.nthread, t0 = getattr(api, QUANTS[quant]), int(threads), time.time()
    try:
        with llama_log() as log:
            api.llama_backend_init()
            rc = api.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
        text = b"".join(log).decode(errors="replace")
        if rc != 0 or not tmp.is_file():
            raise DeployError(f"llama.cpp could not quantize {src} to {quant}:\n{text[-2000:]}")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    m = re.search(r"(\d+) of (\d+) tensor\(s\) required fallback", text)
    res = {"path": str(out), "quant": quant, "seconds": round(time.time() - t0, 2), "size_bytes": out.stat().st_size}
    return res | {"fallback": f"{m.group(1)} of {m.group(2)} tensors" if m else "none"}


def bits_per_weight(gguf_file: Pathish) -> dict:
    """Real bits per weight (tensor bytes x 8 / weights, every tensor) and, per ggml type, the tensors, weights and
    bytes. On SmolLM2-135M (measured, the module docstring's table), "Q4_K_M" is mostly Q5_0: the 576-wide rows do
    not fit Q4_K's blocks of 256 (nor Q6_K's, which fall back to Q8_0, as does the tied embedding).

    >>> bits_per_weight("model-Q8_0.gguf")["bits_per_weight"]  # doctest: +SKIP
    """
    path, by_type = Path(gguf_file), {}
    for _, kind, n_weights, n_bytes in read_gguf(path).tensors:
        row = by_type.setdefault(kind, {"tensors": 0, "weights": 0, "bytes": 0})
        row.update(tensors=row["tensors"] + 1, weights=row["weights"] + n_weights, bytes=row["bytes"] + n_bytes)
    weights, nbytes = sum(r["weights"] for r in by_type.values()), sum(r["bytes"] for r in by_type.values())
    res = {"bits_per_weight": round(8 * nbytes / weights, 4), "weights": weights, "tensor_bytes": nbytes}
    by_type = dict(sorted(by_type.items(), key=lambda kv: -kv[1]["weights"]))
    return res | {"file_bytes": path.stat().st_size, "by_type": by_type}


def tokenizer_parity(gguf_file: Pathish, hf_tokenizer_folder: Pathish, sets: dict, *, show=5, new_ids=None) -> dict:
    """llama.cpp's ids (a vocab-only load, ``special=True``) against ``AutoTokenizer(folder).encode(text,
    add_special_tokens=False)`` on every line of each of ``sets`` (name -> lines): ``lines``, ``equal``, ``share``
    and the first ``show`` mismatches (text, both ids, first differing position); with ``new_ids`` (e.g.
    ``range(n_base, n)``), the same for the lines whose ids (either side) hold a new token and for the others.

    >>> tokenizer_parity("model-F16.gguf", folder, {"az": az})["all"]["share"]  # doctest: +SKIP
    1.0
    """
    require_llama_cpp()
    hf, new, out, total, same = hf_tokenizer(hf_tokenizer_folder), set(new_ids or ()), {}, 0, 0
    for name, lines in sets.items():
        row = {"lines": 0, "equal": 0, "mismatches": []}
        parts = {k: {"lines": 0, "equal": 0} for k in ("with_new", "without_new")} if new else {}
        for text, b in zip(lines, llama_ids(gguf_file, lines)):
            a = list(hf.encode(text, add_special_tokens=False))
            for g in [row, parts["with_new" if new & (set(a) | set(b)) else "without_new"]] if new else [row]:
                g.update(lines=g["lines"] + 1, equal=g["equal"] + (a == b))
            if a != b and len(row["mismatches"]) < show:
                first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                row["mismatches"].append({"text": text, "hf": a, "llama": b, "first_difference": first})
        for g in (row, *parts.values()):
            g["share"] = g["equal"] / g["lines"] if g["lines"] else None
        out[name], total, same = row | parts, total + row["lines"], same + row["equal"]
    return {"sets": out, "all": {"lines": total, "equal": same, "share": same / total if total else None}}


class DeployRecord(TypedDict, total=False):
    """What :func:`deploy` returns and ``deploy.json`` holds: one model folder as checked GGUF files.
    :func:`azllm.recipes.deploy.deploy_model` adds ``key`` and ``name``, :func:`azllm.recipes.deploy.run_deploy`
    ``speed`` and ``answers``."""

    folder: str
    check: dict
    files: dict[str, dict]
    quality: dict[str, dict]
    parity: dict
    logits: dict
    threads: int
    llama_cpp: str
    converter: str
    seconds: float
    key: str
    name: str
    speed: list[dict]
    answers: list[dict]


def deploy(
    folder: Pathish,
    out_dir: Pathish,
    *,
    quants=("F16", "Q8_0", "Q4_K_M"),
    parity_sets: dict[str, list[str]],
    eval_texts: list[str],
    new_ids=None,
    threads: int = 2,
    pre_tokenizer: str | None = None,
    converter: Pathish | None = None,
) -> DeployRecord:
    """Check, convert (F16, always kept: the reference), quantize to each of ``quants``, check every file, write
    ``deploy.json``; ``out_dir`` is built beside itself and swapped in whole. Returns what ``deploy.json`` holds:
    ``check``; ``files`` (per type: path, size, bits per weight, the conversion / quantization record and, for a
    quantized file, ``same_tokenizer``: its tokenizer metadata and its ids on every parity line equal F16's);
    ``parity`` (the F16 file, :func:`tokenizer_parity`); ``logits`` (F16 vs PyTorch on ``eval_texts``);
    ``quality`` (each quantized file vs F16). Speed is :mod:`azllm.bench.gguf`'s, apart.

    >>> deploy(folder, "artifacts/deploy", parity_sets={"az": az}, eval_texts=az[:20])["quality"]  # doctest: +SKIP
    """
    from .gguf_quality import logit_check, quant_quality

    t0, folder, out_dir = time.time(), Path(folder), Path(out_dir)
    if [q for q in quants if q != "F16" and q not in QUANTS]:
        raise DeployError(f"unknown quantization in {quants}; known: F16, {', '.join(QUANTS)}")
    require_llama_cpp()
    check = check_model_folder(folder)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    path = {q: tmp / f"model-{q}.gguf" for q in ("F16", *quants)}
    say = lambda msg: print(f"deploy: {msg}", file=log_stream(), flush=True)  # noqa: E731 - progress, terminal / log
    try:
        say("converting to F16")
        files = {"F16": {"convert": convert(folder, path["F16"], pre_tokenizer=pre_tokenizer, converter=converter)}}
        for q in (q for q in quants if q != "F16"):
            say(f"quantizing to {q}")
            files[q] = {"quantize": quantize(path["F16"], path[q], q, threads=threads)}
        say("checking: tokenizer parity, logits, quality, bits per weight")
        lines = [x for v in parity_sets.values() for x in v]
        ref = (gguf_fields(path["F16"])["tokenizer_sha256"], llama_ids(path["F16"], lines))
        record: DeployRecord = {"folder": str(folder), "check": check, "files": files, "quality": {}}
        record["threads"] = threads
        record["parity"] = tokenizer_parity(path["F16"], folder, parity_sets, new_ids=new_ids)
        record["logits"] = logit_check(path["F16"], folder, eval_texts, threads=threads)
        for q, rec in files.items():
            rec.update(size_bytes=path[q].stat().st_size, **bits_per_weight(path[q]))
            if q != "F16":
                rec["same_tokenizer"] = (gguf_fields(path[q])["tokenizer_sha256"], llama_ids(path[q], lines)) == ref
                record["quality"][q] = quant_quality(path["F16"], path[q], eval_texts, threads=threads)
            rec["path"] = rec.get("convert", rec.get("quantize"))["path"] = str(out_dir / path[q].name)
        record.update(llama_cpp=require_llama_cpp().__version__, converter=str(converter_path(converter)))
        record["seconds"] = round(time.time() - t0, 1)
        atomic_write_json(tmp / "deploy.json", record)
        replace_dir(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"done in {record['seconds']} s -> {out_dir}")
    return record


if __name__ == "__main__":  # the converter's child process (see convert)
    from .utils import exit_now

    exit_now(_converter_child(sys.argv[1]))
