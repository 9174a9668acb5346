"""Vocabulary extension: add Azerbaijani tokens to a pretrained base tokenizer, keeping every base id's meaning.

:func:`extend_tokenizer` learns Azerbaijani pieces on a corpus and appends up to ``n_new`` of them to a base
tokenizer as real vocabulary (with their BPE merges or SentencePiece pieces, not "added tokens" matched before
tokenization), then writes a Hugging Face folder. It covers:

- a ``tokenizer.json`` with a BPE model: byte-level BPE (Llama-3, Qwen, GPT-2 once converted) and
  SentencePiece-style BPE with byte fallback (Gemma). A BPE with the base's own normalizer and pre-tokenizer is
  trained on the corpus; its merges are walked in the order they were learned, and each merge whose two parts
  exist and whose result is a new token is appended after the base merges (new ids after every base id, added
  tokens included).
- a SentencePiece ``.model`` of type BPE (Llama-2, Mistral): a SentencePiece BPE is trained on the corpus with the
  base's normalization settings, and its pieces that the base lacks are appended in their merge order, with scores
  below every base piece (the Chinese-LLaMA recipe).

Decisions:

- **Appended, lowest priority.** New merges rank after every base merge (new pieces score below every base
  piece), so BPE applies them only when no base merge applies any more. Text in other languages keeps its tokens
  except where a word's final base pieces happen to form a new token; :func:`changed_token_share` measures that
  (the goal is under 1% of English FLORES tokens and of code tokens).
- **Whole words inside words.** The corpus is cut into pre-tokens exactly as the base cuts text (its
  pre-tokenizer), so no new token crosses a boundary the base would not cross.
- **No digits** in new tokens: numbers keep the base's segmentation (several bases split digits on purpose).
- Determinism: the same base, corpus, ``n_new`` and seed give the same files (BPE training is deterministic).

>>> folder = extend_tokenizer("tokenizers/llama3.1", docs, 8000, "artifacts/llama3-az8k")  # doctest: +SKIP
>>> load_tokenizer(folder).vocab_size  # doctest: +SKIP
136256
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .utils import DEFAULT_SEED, replace_dir

__all__ = ["extend_tokenizer", "changed_token_share", "base_ids_kept", "VocabError"]

_TRAIN_FACTOR = 3  # train 3 x n_new merges first (most early merges already exist in the base), more if needed


class VocabError(ValueError):
    """A base tokenizer that cannot be extended this way."""


def extend_tokenizer(
    base: str | os.PathLike, corpus: Iterable[str], n_new: int, out_dir: str | os.PathLike, *, seed: int = DEFAULT_SEED
) -> Path:
    """Add up to ``n_new`` Azerbaijani tokens learned on ``corpus`` (normalized documents) to ``base`` (a folder
    with ``tokenizer.json`` or ``tokenizer.model``, or either file) and write a Hugging Face folder ``out_dir``.

    Returns ``out_dir``. ``azllm_vocab.json`` in it records the base, the number of base and new ids and the new
    pieces in order. The base folder's tokenizer config, special tokens and chat template (``chat_template.jinja``,
    where transformers saves it) are copied, so an instruct base keeps its template.
    """
    src = _base_file(Path(base))
    docs = [d for d in corpus if d]
    if not docs:
        raise VocabError("empty corpus: nothing to learn Azerbaijani tokens from")
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        if src.suffix == ".json":
            info = _extend_hf_bpe(src, docs, int(n_new), tmp)
        else:
            info = _extend_sentencepiece(src, docs, int(n_new), tmp, seed)
        for extra in ("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "chat_template.json"):
            if (src.parent / extra).is_file() and not (tmp / extra).exists():
                shutil.copy(src.parent / extra, tmp / extra)
        (tmp / "azllm_vocab.json").write_text(
            json.dumps({"base": str(src), "n_new_requested": int(n_new), **info}, ensure_ascii=False, indent=1)
        )
        replace_dir(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _base_file(p: Path) -> Path:
    for cand in ((p / "tokenizer.json"), (p / "tokenizer.model")) if p.is_dir() else (p,):
        if cand.is_file():
            return cand
    raise VocabError(
        f"{p}: no tokenizer.json or tokenizer.model to extend (GPT-2's vocab.json + merges.txt: save "
        "it as tokenizer.json first, e.g. with AutoTokenizer(...).save_pretrained)"
    )


# --------------------------------------------------------------------------------------------- tokenizer.json


def _extend_hf_bpe(src: Path, docs: list[str], n_new: int, out: Path) -> dict:
    """Append learned merges and tokens to a ``tokenizer.json`` BPE model (see the module docstring)."""
    data = json.loads(src.read_text(encoding="utf-8"))
    model = data["model"]
    if model.get("type") != "BPE":
        raise VocabError(f"{src}: a {model.get('type')} model; only BPE tokenizer.json files are extended")
    vocab = model["vocab"]
    for t in data.get("added_tokens", []):  # ids must stay contiguous: `tokenizers` numbers added tokens after
        if t["content"] not in vocab:  # the model's vocabulary, so a gap would shift every special id
            vocab[t["content"]] = t["id"]
    next_id = 1 + max(vocab.values())
    n_base = next_id
    if sorted(vocab.values()) != list(range(next_id)):
        raise VocabError(f"{src}: the base ids are not contiguous; cannot append after them")
    merges = model["merges"]
    as_list = bool(merges) and isinstance(merges[0], list)
    added: list[str] = []
    for a, b in _enough(
        lambda size: _learned_merges(data, docs, size),
        n_new,
        lambda ms: sum(1 for a, b in ms if a + b not in vocab and not _has_digit(a + b)),
    ):
        t = a + b
        if t in vocab or a not in vocab or b not in vocab or _has_digit(t):
            continue
        vocab[t] = next_id
        next_id += 1
        merges.append([a, b] if as_list else f"{a} {b}")
        added.append(t)
        if len(added) >= n_new:
            break
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return {
        "kind": "tokenizer.json BPE",
        "n_base": n_base,
        "n_new": len(added),
        "vocab_size": next_id,
        "new_tokens": added,
    }


def _enough(learn, n_new: int, count_new) -> list:
    """``learn(size)`` with a growing training size until it yields ``n_new`` candidates (most early merges or
    pieces already exist in the base) or stops growing (the corpus has no more to give)."""
    size, found, last = _TRAIN_FACTOR * n_new, [], -1
    for _ in range(6):
        found = learn(size)
        n = count_new(found)
        if n >= n_new or n == last:
            break
        size, last = size * 2, n
    return found


def _learned_merges(base_data: dict, docs: list[str], size: int) -> list[tuple[str, str]]:
    """Merges of a BPE trained on ``docs`` with the base's normalizer and pre-tokenizer, in learned order."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer

    byte_level = "ByteLevel" in json.dumps(base_data.get("pre_tokenizer")) + json.dumps(base_data.get("decoder"))
    tok = Tokenizer(BPE())
    if base_data.get("normalizer"):
        tok.normalizer = Tokenizer.from_str(json.dumps({**_EMPTY, "normalizer": base_data["normalizer"]})).normalizer
    if base_data.get("pre_tokenizer"):
        tok.pre_tokenizer = Tokenizer.from_str(
            json.dumps({**_EMPTY, "pre_tokenizer": base_data["pre_tokenizer"]})
        ).pre_tokenizer
    elif not byte_level:  # SentencePiece-style (spaces already "▁"): learn within words, as the base pieces are
        tok.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    alphabet = pre_tokenizers.ByteLevel.alphabet() if byte_level else []
    kw = {} if byte_level else {"limit_alphabet": 1000}
    trainer = BpeTrainer(vocab_size=len(alphabet) + size, initial_alphabet=alphabet, show_progress=False, **kw)
    tok.train_from_iterator(docs, trainer=trainer)
    merges = json.loads(tok.to_str())["model"]["merges"]
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in merges]


_EMPTY = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [],
    "normalizer": None,
    "pre_tokenizer": None,
    "post_processor": None,
    "decoder": None,
    "model": {"type": "BPE", "vocab": {}, "merges": []},
}


# ------------------------------------------------------------------------------------------ SentencePiece


def _extend_sentencepiece(src: Path, docs: list[str], n_new: int, out: Path, seed: int) -> dict:
    """Append the pieces of a SentencePiece BPE trained on ``docs`` to a base ``.model`` of type BPE."""
    from transformers.convert_slow_tokenizer import import_protobuf

    pb = import_protobuf()
    base = pb.ModelProto()
    base.ParseFromString(src.read_bytes())
    if base.trainer_spec.model_type != pb.TrainerSpec.BPE:
        raise VocabError(f"{src}: a SentencePiece model of type {base.trainer_spec.model_type}; only BPE is extended")
    have = {p.piece for p in base.pieces}
    learned = _enough(
        lambda size: _learned_pieces(base, docs, size, out, seed),
        n_new,
        lambda ps: sum(1 for p in ps if p not in have and not _has_digit(p)),
    )
    low = min(p.score for p in base.pieces)
    n_base = len(base.pieces)
    added = [p for p in learned if p not in have and not _has_digit(p)][:n_new]
    for k, piece in enumerate(added):
        base.pieces.add(piece=piece, score=low - 1.0 - k, type=pb.ModelProto.SentencePiece.NORMAL)
    (out / "tokenizer.model").write_bytes(base.SerializeToString())
    if not (src.parent / "tokenizer_config.json").is_file():
        (out / "tokenizer_config.json").write_text(
            json.dumps(
                {
                    "tokenizer_class": "LlamaTokenizer",
                    "bos_token": "<s>",
                    "eos_token": "</s>",
                    "unk_token": "<unk>",
                    "legacy": True,
                    "model_max_length": 1_000_000_000,
                }
            )
        )
    return {
        "kind": "SentencePiece BPE",
        "n_base": n_base,
        "n_new": len(added),
        "vocab_size": n_base + len(added),
        "new_tokens": added,
    }


def _learned_pieces(base, docs: list[str], size: int, work: Path, seed: int) -> list[str]:
    """Normal pieces of a SentencePiece BPE trained on ``docs`` with the base's normalization, in merge order."""
    import sentencepiece as spm

    ns = base.normalizer_spec
    corpus = work / "corpus.txt"
    corpus.write_text("\n".join(d.replace("\n", " ") for d in docs) + "\n", encoding="utf-8")
    spm.set_random_generator_seed(seed)
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(work / "az"),
        model_type="bpe",
        vocab_size=size,
        character_coverage=0.9999,
        byte_fallback=True,
        split_digits=base.trainer_spec.split_digits,
        normalization_rule_name="identity",
        add_dummy_prefix=ns.add_dummy_prefix,
        remove_extra_whitespaces=ns.remove_extra_whitespaces,
        max_sentence_length=1 << 16,
        minloglevel=2,
        hard_vocab_limit=False,
        num_threads=2,
    )
    sp = spm.SentencePieceProcessor(model_file=str(work / "az.model"))
    pieces = [
        sp.id_to_piece(i)
        for i in range(sp.get_piece_size())
        if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i) or sp.is_unused(i))
    ]
    for f in ("az.model", "az.vocab", "corpus.txt"):
        (work / f).unlink(missing_ok=True)
    return pieces


def _has_digit(piece: str) -> bool:
    """New tokens never hold digits: numbers keep the base's own segmentation (Gemma and Llama-2 split digits
    one by one; a learned "▁3" would change English and code text too)."""
    return any(ch.isdigit() for ch in piece)


# --------------------------------------------------------------------------------------------- measures


def changed_token_share(base_tok, extended_tok, lines: list[str]) -> float:
    """Share of the base tokenizer's tokens on ``lines`` that the extended tokenizer does not produce unchanged
    (tokens outside the longest common runs of the two encodings of each line).

    >>> changed_token_share(tok, tok, ["any text"])  # doctest: +SKIP
    0.0
    """
    total = changed = 0
    for a, b in zip(base_tok.encode_batch(lines), extended_tok.encode_batch(lines)):
        total += len(a)
        if a != b:
            kept = sum(m.size for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
            changed += len(a) - kept
    return changed / max(total, 1)


def base_ids_kept(base_tok, extended_tok) -> bool:
    """Every base id decodes to the same text in the extended tokenizer (the base ids keep their meaning)."""
    n = base_tok.vocab_size
    if extended_tok.vocab_size < n:
        return False
    return all(base_tok.decode([i]) == extended_tok.decode([i]) for i in range(n) if i not in base_tok.special_ids)
