"""Train SentencePiece tokenizers for Azerbaijani and export them as Hugging Face folders.

:func:`train_tokenizer` wraps ``sentencepiece.SentencePieceTrainer`` with the options that matter for Azerbaijani
and returns the path of a Hugging Face folder that ``AutoTokenizer.from_pretrained(folder)`` loads offline and that
gives the same ids as the SentencePiece model (:mod:`azllm.tokenizer` loads it). Decisions:

- Normalization is :func:`azllm.text.normalize`, applied to the corpus before training (and by the pipeline before
  encoding). The SentencePiece rule is ``identity``: NFKC rules would rewrite characters such as ``…``, and
  case-folding rules are never used.
- Whitespace is kept as it is by default (``remove_extra_whitespaces=False``): a leading, trailing or repeated
  space is encoded, so ``decode(encode(x)) == x`` for raw text too, not only for normalized text. SentencePiece's
  own default strips them, which loses them; the exported ``tokenizer.json`` follows the model either way.
- Special pieces: :data:`azllm.tokenizer.SPECIALS`. Byte fallback on by default, so that no character is ever lost
  to ``<unk>``.
- Affix-aware pre-split: with ``affix_presplit=True`` the training stream gets SentencePiece's
  ``pretokenization_delimiter`` at every suffix boundary that :mod:`azllm.morph` predicts, so no piece crosses a
  predicted stem/suffix boundary. The delimiter only exists at training time: encoding takes plain text.
- Determinism: ``random_seed`` is fixed and the corpus file is written in source order, so the same corpus,
  options and seed give a byte-identical ``sp.model`` (tested).
- The output folder is written atomically (a temporary folder, then a rename) and a re-run with the same corpus
  hash and options returns the existing folder without training again. With ``reuse`` (a folder of notes, one per
  trained model) a model that another folder already holds is copied from there, not trained again: a sweep, the
  run's tokenizer and the one-at-a-time rows often ask for the same model (:func:`training_seconds` still gives
  the seconds its training took).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from .tokenizer import SPECIALS, TokenizerError
from .utils import DEFAULT_SEED, atomic_write_json, json_hash, replace_dir

__all__ = [
    "VocabTooLargeError",
    "VocabTooSmallError",
    "train_tokenizer",
    "export_hf",
    "training_lines",
    "fit_line",
    "write_sample",
    "read_lines",
    "train_sweep",
    "training_seconds",
    "variant_name",
    "PRESPLIT_DELIMITER",
]

PRESPLIT_DELIMITER = "\x1f"  # azllm.text.normalize removes control characters, so it never occurs in text


class VocabTooLargeError(TokenizerError):
    """The requested vocabulary is larger than the corpus supports; ``max_vocab_size`` says what would work."""

    def __init__(self, requested: int, max_vocab_size: int | None, detail: str = ""):
        self.requested = requested
        self.max_vocab_size = max_vocab_size
        hint = (
            f"the largest size that works for this corpus is {max_vocab_size}"
            if max_vocab_size
            else "use a smaller vocab_size or a larger corpus"
        )
        super().__init__(f"vocab_size={requested} is too large for this corpus: {hint}. {detail}".strip())


class VocabTooSmallError(TokenizerError):
    """The requested vocabulary cannot even hold the corpus's characters, the byte pieces and the specials."""

    def __init__(self, requested: int, minimum: int):
        self.requested, self.minimum = requested, minimum
        super().__init__(
            f"vocab_size={requested} is too small for this corpus: its characters (at "
            f"character_coverage), the byte-fallback pieces and the 4 specials need at least {minimum} "
            "ids. Use a vocab_size of at least that, or a lower character_coverage."
        )


_TOO_HIGH = re.compile(r"Vocabulary size (?:is )?too high \((\d+)\)\. Please set it to a value <= (\d+)")
_TOO_SMALL = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")

MAX_LINE_BYTES = 1 << 16
"""SentencePiece's ``max_sentence_length``: it skips longer lines silently, so :func:`fit_line` splits them."""
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")


def fit_line(text: str, max_bytes: int = MAX_LINE_BYTES) -> list[str]:
    """``text`` (one document on one line) as lines of at most ``max_bytes`` UTF-8 bytes: whole when it fits, else
    whole sentences packed greedily, a sentence longer than that at spaces, a run without spaces at characters.
    Nothing is dropped: the lines joined by spaces give ``text`` back (up to the whitespace at the cuts).

    >>> fit_line("Bakı böyükdür. Gəncə qədimdir.", max_bytes=20)
    ['Bakı böyükdür.', 'Gəncə qədimdir.']
    >>> fit_line("Salam dünya", max_bytes=8)
    ['Salam', 'dünya']
    """
    if len(text.encode("utf-8")) <= max_bytes:
        return [text]
    lines: list[str] = []
    for unit_re in (_SENTENCE_END, re.compile(r"\s+")):
        units = unit_re.split(text)
        if len(units) > 1:
            break
    else:  # no sentence end and no space: cut at characters
        out, cur = [], ""
        for ch in text:
            if len((cur + ch).encode("utf-8")) > max_bytes:
                out.append(cur)
                cur = ""
            cur += ch
        return out + ([cur] if cur else [])
    cur = ""
    for u in units:
        cand = f"{cur} {u}" if cur else u
        if len(cand.encode("utf-8")) <= max_bytes:
            cur = cand
            continue
        if cur:
            lines.append(cur)
        if len(u.encode("utf-8")) <= max_bytes:
            cur = u
        else:
            *whole, cur = fit_line(u, max_bytes)
            lines.extend(whole)
    return lines + ([cur] if cur else [])


def _write_training_text(texts: Iterable[str], path: Path, affix_presplit: bool) -> tuple[str, int, int]:
    """Write the training lines, one sentence each (a sentence over SentencePiece's line limit split by
    :func:`fit_line`); returns their sha256, count and bytes.

    Sentences, not documents, so that ``input_sentence_size`` (the lines SentencePiece samples and holds) bounds
    its memory in bytes whatever the documents' length: two million sentences of about 100 bytes. A piece never
    spans a line, and no piece spans the whitespace between sentences either (``split_by_whitespace``)."""
    from .morph import presplit

    h = hashlib.sha256()
    n = size = 0
    with open(path, "w", encoding="utf-8") as f:
        for part in training_lines(texts):
            if affix_presplit:
                part = presplit(part, PRESPLIT_DELIMITER)
            line = (part + "\n").encode("utf-8")
            f.write(part + "\n")
            h.update(line)
            n += 1
            size += len(line)
    if n == 0:
        raise TokenizerError("empty corpus: no non-empty line to train a tokenizer on")
    return h.hexdigest(), n, size


def training_lines(texts: Iterable[str]) -> Iterator[str]:
    """The lines a tokenizer trains on: one sentence each (cut after ``.!?;:`` and whitespace), a sentence over
    SentencePiece's line limit split by :func:`fit_line`.

    >>> list(training_lines(["Bakı böyükdür. Gəncə qədimdir.", "", "Salam"]))
    ['Bakı böyükdür.', 'Gəncə qədimdir.', 'Salam']
    """
    for t in texts:
        t = t.replace("\n", " ").strip()
        if t:
            for sentence in _SENTENCE_END.split(t):
                yield from fit_line(sentence)


def write_sample(texts: Iterable[str], path: str | os.PathLike, *, max_lines: int, seed: int = DEFAULT_SEED) -> dict:
    """One seeded sample of at most ``max_lines`` training lines (:func:`training_lines`) of ``texts``, in their
    order, written to ``path`` (with ``<path>.json``: lines, bytes and the sha256 of all the input's lines). The
    input is read once into a temporary file (memory stays flat), then the chosen lines are copied. An existing
    sample of the same input, size and seed is kept as it is. ``max_lines`` 0: every line.

    Which lines are chosen depends only on the number of lines and the seed, so the sweep and the main tokenizer,
    given the same documents, train on the same sample.

    >>> write_sample(docs, "artifacts/default/tokenizer_sample.txt", max_lines=2_000_000)  # doctest: +SKIP
    {'input_lines': 181034, 'lines': 181034, 'bytes': 9817210, 'input_sha256': '…', 'max_lines': 2000000, 'seed': 0}
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta_path = path.with_name(path.name + ".json")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.all")
    h, n = hashlib.sha256(), 0
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for line in training_lines(texts):
                data = line + "\n"
                f.write(data)
                h.update(data.encode("utf-8"))
                n += 1
        if n == 0:
            raise TokenizerError("empty corpus: no non-empty line to train a tokenizer on")
        want = {"input_lines": n, "input_sha256": h.hexdigest(), "max_lines": int(max_lines), "seed": int(seed)}
        try:
            old = json.loads(meta_path.read_text())
            if {k: old.get(k) for k in want} == want and path.is_file():
                return old
        except (OSError, ValueError):
            pass
        keep = None
        if max_lines and n > max_lines:
            keep = np.zeros(n, dtype=bool)
            keep[np.random.default_rng(seed).choice(n, size=int(max_lines), replace=False)] = True
        lines = size = 0
        out_tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, encoding="utf-8") as src, open(out_tmp, "w", encoding="utf-8") as dst:
            for i, line in enumerate(src):
                if keep is None or keep[i]:
                    dst.write(line)
                    lines += 1
                    size += len(line.encode("utf-8"))
        os.replace(out_tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    meta = {**want, "lines": lines, "bytes": size}
    atomic_write_json(meta_path, meta)
    return meta


def read_lines(path: str | os.PathLike) -> Iterator[str]:
    """The lines of a text file, lazily (a sample of :func:`write_sample`, to train on)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield line.rstrip("\n")


def train_tokenizer(
    texts: Iterable[str],
    out_dir: str | os.PathLike,
    *,
    vocab_size: int,
    model_type: str,
    character_coverage: float = 0.9999,
    byte_fallback: bool = True,
    split_digits: bool = False,
    max_piece_length: int = 16,
    affix_presplit: bool = False,
    split_by_whitespace: bool = True,
    split_by_unicode_script: bool = True,
    remove_extra_whitespaces: bool = False,
    input_sentence_size: int = 0,
    num_threads: int = 2,
    seed: int = DEFAULT_SEED,
    force: bool = False,
    reuse: str | os.PathLike | None = None,
) -> Path:
    """Train a SentencePiece tokenizer on ``texts`` (already normalized documents) and export it.

    Returns ``out_dir``, which then holds ``sp.model`` / ``sp.vocab`` (SentencePiece), ``tokenizer.json``,
    ``tokenizer_config.json``, ``special_tokens_map.json`` (Hugging Face) and ``azllm_tokenizer.json`` (options,
    corpus sha256, line count). Raises :class:`VocabTooLargeError` when the corpus cannot fill ``vocab_size``.
    The keyword defaults are SentencePiece-level choices for Azerbaijani; a run takes its values from
    :class:`azllm.config.TokenizerConfig` (through :func:`azllm.recipes.tokenizers.tokenizer_options`).

    ``reuse``: a folder where each model trained with it leaves a note, ``<key>.json`` (its folder, files and
    training seconds; the key hashes the corpus and the options). A model asked for again, into another folder, is
    copied from the folder its note names, as long as that folder still holds it; else it is trained.

    Steps: write the corpus (hashing it) -> reuse an identical earlier model (in ``out_dir``, else one noted in
    ``reuse``) -> train -> export -> rename -> note it in ``reuse``.

    >>> folder = train_tokenizer(lines, "artifacts/tok", vocab_size=8000, model_type="bpe")  # doctest: +SKIP
    >>> AutoTokenizer.from_pretrained(folder)  # doctest: +SKIP
    """
    if model_type not in ("unigram", "bpe"):
        raise TokenizerError(f"model_type must be 'unigram' or 'bpe', got {model_type!r}")
    out_dir = Path(out_dir)
    opts = dict(
        vocab_size=int(vocab_size),
        model_type=model_type,
        character_coverage=float(character_coverage),
        byte_fallback=bool(byte_fallback),
        split_digits=bool(split_digits),
        max_piece_length=int(max_piece_length),
        affix_presplit=bool(affix_presplit),
        split_by_whitespace=bool(split_by_whitespace),
        split_by_unicode_script=bool(split_by_unicode_script),
        remove_extra_whitespaces=bool(remove_extra_whitespaces),
        input_sentence_size=int(input_sentence_size),
        seed=int(seed),
    )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        corpus_sha, n_lines, n_bytes = _write_training_text(texts, tmp / "corpus.txt", affix_presplit)
        key = json_hash({"opts": opts, "corpus": corpus_sha}, n=None)
        if not force and _same_model_exists(out_dir, key):
            return out_dir
        if not force and reuse is not None and _copy_noted(Path(reuse), key, tmp):
            replace_dir(tmp, out_dir)
            return out_dir
        sampled = n_bytes * (min(1.0, opts["input_sentence_size"] / n_lines) if opts["input_sentence_size"] else 1.0)
        _run_sentencepiece(tmp, opts, int(num_threads), extremely_large=sampled > 0.9 * 2**31)
        (tmp / "corpus.txt").unlink()
        export_hf(tmp / "sp.model", tmp)
        (tmp / "azllm_tokenizer.json").write_text(
            json.dumps(
                {
                    "key": key,
                    "options": opts,
                    "corpus_sha256": corpus_sha,
                    "corpus_lines": n_lines,
                    "sentencepiece_model_sha256": hashlib.sha256((tmp / "sp.model").read_bytes()).hexdigest(),
                },
                indent=2,
            )
        )
        files = sorted(f.name for f in tmp.iterdir())
        replace_dir(tmp, out_dir)
        if reuse is not None:
            note = {"folder": str(out_dir.resolve()), "files": files, "train_s": time.perf_counter() - t0}
            atomic_write_json(Path(reuse) / f"{key}.json", note)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _copy_noted(reuse: Path, key: str, into: Path) -> bool:
    """Copy the model that ``reuse``'s note for ``key`` names into ``into`` (in place of its training corpus); False
    when there is no note or its folder no longer holds that model."""
    try:
        note = json.loads((reuse / f"{key}.json").read_text())
        src, files = Path(note["folder"]), list(note["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not files or not _same_model_exists(src, key) or not all((src / f).is_file() for f in files):
        return False
    (into / "corpus.txt").unlink()
    for f in files:
        shutil.copyfile(src / f, into / f)
    return True


def training_seconds(folder: str | os.PathLike, reuse: str | os.PathLike) -> float | None:
    """Seconds that the training of the model in ``folder`` took (corpus writing and export included), from its
    note in ``reuse`` (:func:`train_tokenizer`): the same for every folder it was copied into. None when it was
    not noted there."""
    try:
        key = json.loads((Path(folder) / "azllm_tokenizer.json").read_text())["key"]
        return float(json.loads((Path(reuse) / f"{key}.json").read_text())["train_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _same_model_exists(out_dir: Path, key: str) -> bool:
    """An earlier export in ``out_dir`` was trained on the same corpus with the same options."""
    meta = out_dir / "azllm_tokenizer.json"
    try:
        return json.loads(meta.read_text()).get("key") == key and (out_dir / "tokenizer.json").is_file()
    except (OSError, json.JSONDecodeError):
        return False


def _run_sentencepiece(tmp: Path, opts: dict, num_threads: int, extremely_large: bool = False) -> None:
    """Train ``tmp/sp.model`` from ``tmp/corpus.txt`` (our options, identity normalization, fixed specials);
    ``extremely_large``: the lines SentencePiece loads may pass 2^31 characters (its 64-bit suffix array)."""
    import sentencepiece as spm

    spm.set_random_generator_seed(opts["seed"])
    kwargs = dict(
        input=str(tmp / "corpus.txt"),
        model_prefix=str(tmp / "sp"),
        vocab_size=opts["vocab_size"],
        model_type=opts["model_type"],
        character_coverage=opts["character_coverage"],
        byte_fallback=opts["byte_fallback"],
        split_digits=opts["split_digits"],
        max_sentencepiece_length=opts["max_piece_length"],
        split_by_whitespace=opts["split_by_whitespace"],
        split_by_unicode_script=opts.get("split_by_unicode_script", True),
        normalization_rule_name="identity",
        remove_extra_whitespaces=opts.get("remove_extra_whitespaces", False),
        input_sentence_size=opts["input_sentence_size"],
        shuffle_input_sentence=True,
        num_threads=num_threads,
        max_sentence_length=MAX_LINE_BYTES,
        train_extremely_large_corpus=extremely_large,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=3,
        unk_piece=SPECIALS["unk"],
        bos_piece=SPECIALS["bos"],
        eos_piece=SPECIALS["eos"],
        pad_piece=SPECIALS["pad"],
        hard_vocab_limit=True,
        minloglevel=2,
    )
    if opts["affix_presplit"]:
        kwargs["pretokenization_delimiter"] = PRESPLIT_DELIMITER
    try:
        spm.SentencePieceTrainer.train(**kwargs)
    except RuntimeError as e:
        m = _TOO_HIGH.search(str(e))
        if m:
            raise VocabTooLargeError(opts["vocab_size"], int(m.group(2))) from None
        m = _TOO_SMALL.search(str(e))
        if m:
            raise VocabTooSmallError(opts["vocab_size"], int(m.group(2))) from None
        raise TokenizerError(f"SentencePiece training failed: {e}") from None
    _check_vocab_filled(tmp / "sp.model", opts["vocab_size"])
    _strip_paths(tmp / "sp.model")


def _check_vocab_filled(model_path: Path, vocab_size: int) -> None:
    import sentencepiece as spm

    n = spm.SentencePieceProcessor(model_file=str(model_path)).get_piece_size()
    if n < vocab_size:
        raise VocabTooLargeError(vocab_size, n)


def _strip_paths(model_path: Path) -> None:
    """SentencePiece stores the (temporary) input and output paths in the model; replace them with fixed names
    so that the model file depends only on the corpus, the options and the seed."""
    from transformers.convert_slow_tokenizer import import_protobuf

    proto = import_protobuf().ModelProto()
    proto.ParseFromString(model_path.read_bytes())
    del proto.trainer_spec.input[:]
    proto.trainer_spec.input.append("corpus.txt")
    proto.trainer_spec.model_prefix = "sp"
    model_path.write_bytes(proto.SerializeToString())
    vocab = model_path.with_suffix(".vocab")
    if vocab.exists():
        vocab.write_text("".join(f"{p.piece}\t{p.score:g}\n" for p in proto.pieces), encoding="utf-8")


def export_hf(model_path: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Convert a SentencePiece model into a Hugging Face tokenizer folder (``tokenizer.json`` + config).

    Uses transformers' own SentencePiece conversion (``SpmConverter.build_tokenizer_from_spm_proto``), which
    follows the model's normalizer spec, byte fallback and BPE merge order, so the ids equal SentencePiece's.
    """
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import SpmConverter, import_protobuf

    model_pb2 = import_protobuf()
    proto = model_pb2.ModelProto()
    proto.ParseFromString(Path(model_path).read_bytes())
    if proto.trainer_spec.model_type == 1:  # unigram
        vocab = [(p.piece, p.score) for p in proto.pieces]
    else:
        vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    tok = SpmConverter.build_tokenizer_from_spm_proto(proto, vocab, legacy=False)
    if tok is None:
        raise TokenizerError(f"{model_path}: unsupported SentencePiece model type {proto.trainer_spec.model_type}")
    spec = proto.normalizer_spec
    if spec.add_dummy_prefix and not spec.remove_extra_whitespaces:
        _keep_leading_spaces(tok)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token=SPECIALS["unk"],
        bos_token=SPECIALS["bos"],
        eos_token=SPECIALS["eos"],
        pad_token=SPECIALS["pad"],
        model_max_length=1_000_000_000,
        clean_up_tokenization_spaces=False,
    )
    hf.save_pretrained(str(out_dir))
    return Path(out_dir)


def _keep_leading_spaces(tok) -> None:
    """Make the converted tokenizer encode a line that starts with a space as SentencePiece does when it keeps
    whitespace: one ``▁`` always prepended, then every space a ``▁``. The converter's ``Metaspace`` pre-tokenizer
    prepends only when the line does not already start with ``▁``, so ``" Bakı"`` lost its space. A BPE or unigram
    model of ours never holds ``▁`` inside a piece (``split_by_whitespace``), so no pre-tokenizer is needed.

    >>> export_hf("sp.model", "out")  # doctest: +SKIP
    """
    from tokenizers import normalizers

    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = None


# ----------------------------------------------------------------------------------------------------- sweeps


def variant_name(opts: dict) -> str:
    """Short name of a tokenizer variant.

    >>> variant_name({"model_type": "unigram", "vocab_size": 32000, "affix_presplit": True})
    'unigram-32k-affix'
    """
    vs = opts["vocab_size"]
    size = f"{vs // 1000}k" if vs % 1000 == 0 else str(vs)
    return f"{opts['model_type']}-{size}" + ("-affix" if opts.get("affix_presplit") else "")


def train_sweep(
    docs: Iterable[str],
    out_root: str | os.PathLike,
    options: list[dict],
    progress: bool = True,
    sample: str | os.PathLike | None = None,
    reuse: str | os.PathLike | None = None,
) -> tuple[dict[str, Path], dict[str, str]]:
    """Train every variant of ``options`` on one sample of ``docs`` into ``out_root/<variant name>``.

    The sample (:func:`write_sample`: ``input_sentence_size`` lines of the options, seeded by their seed) is written
    once, to ``sample`` (default ``out_root/sample.txt``), and every variant trains on it, so the sweep reads the
    corpus once, not once per variant. ``reuse``: as :func:`train_tokenizer`'s.

    Returns ``(trained, skipped)``: name -> folder for the variants trained (or reused: see
    :func:`train_tokenizer`), and name -> reason for the variants whose vocabulary the corpus cannot fill
    (:class:`VocabTooLargeError`), so that a sweep reports them instead of stopping.
    """
    from .utils import progress as progress_bar

    out, skipped = {}, {}
    if not options:
        return out, skipped
    sizes = {(o.get("input_sentence_size", 0), o.get("seed", DEFAULT_SEED)) for o in options}
    if len(sizes) != 1:
        raise TokenizerError(f"a sweep shares one sample: its options differ in (input_sentence_size, seed) {sizes}")
    max_lines, seed = sizes.pop()
    sample = Path(sample) if sample is not None else Path(out_root) / "sample.txt"
    write_sample(docs, sample, max_lines=max_lines, seed=seed)
    for opts in progress_bar(options, desc="training tokenizers", disable=not progress):
        name = variant_name(opts)
        try:
            out[name] = train_tokenizer(read_lines(sample), Path(out_root) / name, reuse=reuse, **opts)
        except VocabTooLargeError as e:
            skipped[name] = str(e)
    return out, skipped
