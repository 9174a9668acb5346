"""Load any tokenizer with one interface: :class:`Tok`.

:func:`load_tokenizer` accepts a Hugging Face folder (one of ours, holding ``sp.model``, is encoded by the
SentencePiece engine: same ids as its ``tokenizer.json``, about 6x faster), a ``tokenizer.json``, a SentencePiece
``.model``, a tiktoken encoding name (``"tiktoken:cl100k_base"`` or a bare known name; offline through
``TIKTOKEN_CACHE_DIR``) or a hub id, and returns a :class:`Tok` whose ``encode`` never adds special tokens.
:func:`load_baseline` loads a baseline of the params (its local file, else its hub id). Training our own:
:mod:`azllm.tokenizer_train`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["load_baseline", "Tok", "TokenizerError", "load_tokenizer", "TIKTOKEN_NAMES", "SPECIALS"]

TIKTOKEN_NAMES = {"gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony"}
SPECIALS = {"unk": "<unk>", "bos": "<s>", "eos": "</s>", "pad": "<pad>"}
"""The special pieces of our tokenizers: ``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2, ``<pad>`` = 3."""
_BYTE_PIECE = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")


class TokenizerError(ValueError):
    """A tokenizer cannot be trained or loaded."""


@dataclass
class Tok:
    """A loaded tokenizer with one interface for every backend.

    ``encode`` never adds special tokens; ``decode`` skips none (special ids decode to their text).
    """

    name: str
    kind: str  # "sentencepiece" | "hf" | "tiktoken"
    vocab_size: int
    encode_fn: Callable[[str], list[int]] = field(repr=False)
    decode_fn: Callable[[list[int]], str] = field(repr=False)
    encode_batch_fn: Callable[[list[str]], list[list[int]]] | None = field(default=None, repr=False)
    fallback_ids: frozenset[int] = field(default=frozenset(), repr=False)  # unk and byte-fallback ids
    special_ids: frozenset[int] = field(default=frozenset(), repr=False)
    eos_id: int | None = None
    bos_id: int | None = None
    pad_id: int | None = None
    unk_id: int | None = None
    id_to_piece: Callable[[int], str] | None = field(default=None, repr=False)
    fingerprint: str = ""  # sha256 of the tokenizer's serialized form
    path: str | None = None  # a Hugging Face folder, when there is one

    def encode(self, text: str) -> list[int]:
        return self.encode_fn(text)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        if self.encode_batch_fn is not None:
            return self.encode_batch_fn(list(texts))
        return [self.encode_fn(t) for t in texts]

    def decode(self, ids: Iterable[int]) -> str:
        return self.decode_fn(list(ids))


# ----------------------------------------------------------------------------------------------------- loading


def _sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _from_sentencepiece(path: Path, name: str) -> Tok:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(path))
    n = sp.get_piece_size()
    fallback = frozenset(i for i in range(n) if sp.is_unknown(i) or sp.is_byte(i))
    special = frozenset(i for i in range(n) if sp.is_control(i) or sp.is_unknown(i))
    ids = lambda i: i if i >= 0 else None  # noqa: E731
    return Tok(
        name=name,
        kind="sentencepiece",
        vocab_size=n,
        encode_fn=lambda t: sp.encode(t),
        decode_fn=lambda ids_: sp.decode(ids_),
        encode_batch_fn=lambda ts: sp.encode(ts, num_threads=os.cpu_count() or 1),
        fallback_ids=fallback,
        special_ids=special,
        eos_id=ids(sp.eos_id()),
        bos_id=ids(sp.bos_id()),
        pad_id=ids(sp.pad_id()),
        unk_id=ids(sp.unk_id()),
        id_to_piece=sp.id_to_piece,
        fingerprint=_sha256_bytes(sp.serialized_model_proto()),
    )


def _from_hf_tokenizer(tok, name: str, path: str | None = None) -> Tok:
    """Wrap a ``tokenizers.Tokenizer``."""
    serialized = tok.to_str()  # once: slow for a large vocabulary
    model = json.loads(serialized).get("model", {})
    vocab = tok.get_vocab(with_added_tokens=True)
    fallback = set()
    if model.get("byte_fallback"):
        fallback |= {i for t, i in vocab.items() if _BYTE_PIECE.match(t)}
    unk_id = None
    unk = model.get("unk_token")
    if unk is not None and unk in vocab:
        unk_id = vocab[unk]
    if model.get("type") == "Unigram" and model.get("unk_id") is not None:
        unk_id = int(model["unk_id"])
    if unk_id is not None:
        fallback.add(unk_id)
    added = tok.get_added_tokens_decoder()
    special = frozenset(i for i, t in added.items() if t.special)
    declared = {}
    if path and (Path(path) / "tokenizer_config.json").is_file():
        cfg = json.loads((Path(path) / "tokenizer_config.json").read_text(encoding="utf-8"))
        for k in ("eos_token", "bos_token", "pad_token"):
            v = cfg.get(k)
            declared[k] = v.get("content") if isinstance(v, dict) else v
    specials = {t.content: i for i, t in added.items() if t.special}

    def find(key: str, names: tuple[str, ...]) -> int | None:
        if declared.get(key) in vocab:
            return vocab[declared[key]]
        for pool in (specials, vocab):  # prefer special tokens: "</s>" can be an ordinary piece
            for t in names:
                if t in pool:
                    return pool[t]
        return None

    eos = find("eos_token", ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|im_end|>"))
    bos = find("bos_token", ("<|begin_of_text|>", "<s>", "<bos>"))
    pad = find("pad_token", ("<pad>", "<|pad|>"))
    return Tok(
        name=name,
        kind="hf",
        vocab_size=tok.get_vocab_size(with_added_tokens=True),
        encode_fn=lambda t: tok.encode(t, add_special_tokens=False).ids,
        decode_fn=lambda ids: tok.decode(ids, skip_special_tokens=False),
        encode_batch_fn=lambda ts: [e.ids for e in tok.encode_batch(ts, add_special_tokens=False)],
        fallback_ids=frozenset(fallback),
        special_ids=special,
        eos_id=eos,
        bos_id=bos,
        pad_id=pad,
        unk_id=unk_id,
        id_to_piece=tok.id_to_token,
        fingerprint=_sha256_bytes(serialized.encode()),
        path=path,
    )


def _from_tiktoken(enc_name: str, name: str, cache_dir: str | os.PathLike | None = None) -> Tok:
    import tiktoken

    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    if cache_dir is not None:  # tiktoken reads its cache folder from the environment: set it for this call only
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    try:
        enc = tiktoken.get_encoding(enc_name)
    except Exception as e:  # network or cache miss
        raise TokenizerError(
            f"tiktoken encoding {enc_name!r} could not be loaded ({type(e).__name__}: {e}). Offline, pass "
            "tiktoken_cache= (or set TIKTOKEN_CACHE_DIR) to a folder holding tiktoken's cache files."
        ) from e
    finally:
        if cache_dir is not None:
            if old is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = old
    ranks_hash = _sha256_bytes(repr(sorted(enc._mergeable_ranks.items())[:1000]).encode() + enc.name.encode())
    return Tok(
        name=name,
        kind="tiktoken",
        vocab_size=enc.n_vocab,
        encode_fn=lambda t: enc.encode_ordinary(t),
        decode_fn=lambda ids: enc.decode(ids),
        encode_batch_fn=lambda ts: enc.encode_ordinary_batch(ts),
        special_ids=frozenset(enc._special_tokens.values()),
        eos_id=enc.eot_token,
        fingerprint=ranks_hash,
    )


def _from_vocab_merges(folder: Path, name: str) -> Tok:
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    tok = Tokenizer(BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    t = _from_hf_tokenizer(tok, name, str(folder))
    vocab = tok.get_vocab()
    if "<|endoftext|>" in vocab:
        t.eos_id = vocab["<|endoftext|>"]
        t.special_ids = frozenset({t.eos_id})
    return t


def load_tokenizer(
    spec: str | os.PathLike, name: str | None = None, *, tiktoken_cache: str | os.PathLike | None = None
) -> Tok:
    """Load a tokenizer from any supported spec (see the module docstring).

    ``tiktoken_cache``: the folder of tiktoken's cache files, for a tiktoken spec offline.

    >>> tok = load_tokenizer("tiktoken:gpt2")  # doctest: +SKIP
    >>> tok.encode("Salam")  # doctest: +SKIP
    [19221, 321]
    """
    s = str(spec)
    name = name or (Path(s).name if os.path.exists(s) else s)
    if s.startswith("tiktoken:") or s in TIKTOKEN_NAMES:
        return _from_tiktoken(s.split(":", 1)[-1], name, tiktoken_cache)
    p = Path(os.path.expanduser(s))
    if p.is_dir():
        return _from_folder(p, name)
    if p.is_file():
        if p.suffix == ".model":
            return _from_sentencepiece(p, name)
        if p.suffix == ".json":
            from tokenizers import Tokenizer

            return _from_hf_tokenizer(Tokenizer.from_file(str(p)), name, str(p.parent))
        raise TokenizerError(f"{p}: unknown tokenizer file type (expected a folder, tokenizer.json or .model)")
    if s.startswith(("/", "./", "../", "~")) or s.endswith((".model", ".json")) or s.count("/") > 1:
        raise TokenizerError(f"tokenizer file not found: {s}")
    return _from_hub(s, name)


def load_baseline(
    name: str,
    *,
    local: str | os.PathLike | None,
    path: str | None = None,
    hub: str | None = None,
    tiktoken: str | None = None,
    data_root: str | os.PathLike | None = None,
) -> Tok:
    """A baseline tokenizer: the ``local`` file or folder when there is one, else the ``hub`` id; a ``tiktoken``
    encoding name reads tiktoken's cache from ``local`` (a folder of cached files; None: tiktoken's own cache).
    ``path`` and ``data_root`` only word the error when neither is there.

    >>> load_baseline("gpt4o", local=None, tiktoken="o200k_base").kind  # doctest: +SKIP
    'tiktoken'
    """
    if tiktoken:
        spec, cache = f"tiktoken:{tiktoken}", local
    elif local is not None or hub:
        spec, cache = str(local) if local is not None else hub, None
    else:
        raise TokenizerError(
            f"baseline tokenizer {name!r} not found: path {path!r} does not exist under "
            f"data root {data_root} and no hub id is given"
        )
    try:
        return load_tokenizer(spec, name=name, tiktoken_cache=cache)
    except TokenizerError:
        raise
    except Exception as e:
        raise TokenizerError(f"baseline {name!r} ({spec}) could not be loaded: {type(e).__name__}: {e}") from e


def _from_folder(p: Path, name: str) -> Tok:
    if (p / "sp.model").is_file():  # our own export: the SentencePiece engine is ~6x faster than HF's
        tok = _from_sentencepiece(p / "sp.model", name)
        tok.path = str(p)
        return tok
    if (p / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        return _from_hf_tokenizer(Tokenizer.from_file(str(p / "tokenizer.json")), name, str(p))
    if (p / "tokenizer.model").is_file():
        return _from_sentencepiece(p / "tokenizer.model", name)
    if (p / "vocab.json").is_file() and (p / "merges.txt").is_file():
        return _from_vocab_merges(p, name)
    raise TokenizerError(f"{p}: no tokenizer.json, *.model or vocab.json+merges.txt in this folder")


def _from_hub(hub_id: str, name: str) -> Tok:
    """A hub id such as ``meta-llama/Llama-3.2-1B`` (a gated one needs ``HF_TOKEN`` in the environment)."""
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(hub_id)
    except Exception as e:
        raise TokenizerError(f"could not load tokenizer {hub_id!r} from the Hugging Face Hub: {e}") from e
    return _from_hf_tokenizer(hf.backend_tokenizer, name)
