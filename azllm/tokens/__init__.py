"""Token files: stream a corpus through a tokenizer into one binary file per split, map it back, serve batches.

Text -> ``train.bin`` / ``val.bin`` -> ``np.memmap`` -> random windows, the way nanoGPT / llm.c feed a model.

File format (version 1). Each ``.bin`` file is a 1024-byte header followed by the token ids::

    bytes 0-7     magic b"AZTOKENS"
    bytes 8-11    uint32 little-endian format version (1)
    bytes 12-15   uint32 length L of the JSON header
    bytes 16-16+L JSON: {"format_version", "split", "dtype", "n_tokens", "n_docs", "vocab_size", "eos_id",
                  "tokenizer_fingerprint", "tokenizer_name", "key", "docs_sha256", "val_fraction", "seed"}
    ... zeros up to byte 1024, then n_tokens ids in ``dtype`` (little-endian), documents one after the other,
    each followed by the EOS id.

``head -c 1024 train.bin`` shows the header. Beside each ``.bin``, ``train.idx`` / ``val.idx`` is the document
index: one little-endian uint64 per document, the position just after its EOS (:meth:`TokenFile.doc_ends`). The
sidecar ``tokens.json`` (written last) repeats both headers and adds what is not needed to read a file (inputs,
timings, parts). Decisions:

- **dtype**: ``uint16`` when ``vocab_size <= 65536`` (ids 0..65535), otherwise ``uint32`` (:func:`token_dtype`).
- **EOS after every document**, so the model sees where documents end and windows may cross them knowingly.
  A tokenizer without an EOS id is refused.
- **Split per document** by a keyed hash: ``blake2b(utf8(doc), key=str(seed))``; a document goes to ``val`` when
  the first 8 bytes of the digest, read as a fraction of 2**64, are below ``val_fraction``. The decision depends
  only on the text, the seed and the fraction, never on the order or the position, so identical documents (exact
  duplicates) always land in the same split and nothing leaks; it is stable when the corpus grows.
- **Idempotent**: ``key`` = sha256 of (format version, tokenizer fingerprint, val_fraction, seed, ``docs_sha256``)
  where ``docs_sha256`` is a running sha256 over the 16-byte blake2b digest of every document in order, computed
  during the pass (one hash per document, no second read). A re-run is skipped when the existing files carry the
  same key. Knowing the key needs a pass over the documents, so two cheaper checks come first: (1) ``inputs``, a
  JSON-able description given by the caller that pins the documents (for local files: their sha256s plus the
  source options, see :func:`encode_source`); when the sidecar holds the same ``inputs`` key and the files verify,
  nothing is read at all. (2) When ``docs`` is re-iterable (a list, or a zero-argument callable returning a fresh
  iterator), a hash-only pass (no tokenization) decides. A one-shot generator without ``inputs`` is encoded again;
  if the result has the same key the existing files are kept untouched.
- **Resumable**: the documents are encoded in parts of about ``part_chars`` characters (64 Mi by default) into
  ``.parts/<run>/`` (``<run>``: tokenizer, options and ``inputs``); a part is complete when its json is written,
  last. A killed run loses only the part it was encoding: the next run with the same options reads the documents
  of the complete parts again only to hash them (about 1 GB/s), keeps every part whose documents hash the same and
  encodes from the first that differs. The parts are then joined into the final files, so the result is
  byte-identical to an uninterrupted run (tested by killing an encoding process), at the cost of one copy of the
  ids and, for a while, twice their disk space.
- **Atomic**: the joined ids are written to ``.<name>.<pid>.tmp`` beside the final files and renamed at the end
  (indexes, val, then train, then the sidecar), and the parts are deleted. A killed run leaves only temporary files
  and complete parts; the next run deletes the temporary files when their process is gone; each final file is
  always complete and self-describing.
- **Flat memory**: the corpus is cut into chunks of at most ``chunk_docs`` documents / ``chunk_chars`` characters;
  at most ``2 * num_workers`` chunks are in flight; ids go to disk as soon as their chunk is done.
- **Parallel**: ``num_workers`` threads each encode whole chunks; the tokenizers release the GIL while encoding
  (SentencePiece, HF tokenizers, tiktoken), so threads use every core with no pickling and no process start-up.
  Results are written in submission order, so the output is byte-identical for any ``num_workers``.
  Backend: when the tokenizer is a folder holding ``sp.model`` (our trained tokenizers), the SentencePiece engine
  is used directly (one thread per call); it gives the same ids as the folder's ``tokenizer.json`` (checked on the
  first documents of every run) and is several times faster than HF tokenizers' Unigram on this corpus
  (measured by :mod:`azllm.bench.encoder`). Otherwise ``Tok.encode_batch`` is used.
  Measured on 2 cores (``python -m azllm.bench.encoder``): with the documents in memory the threads
  encode at 0.97x the SentencePiece batch-encode limit, and at about 0.9x streaming them from a file (reading
  and hashing take the rest), so worker processes, which would add pickling and start-up on top, were not
  built. The serial part left is the caller's document iterator (reading, :func:`azllm.text.normalize`).

Reading: :class:`TokenFile` maps a file read-only and checks magic, version, size and (when given) the tokenizer
fingerprint. :meth:`TokenFile.get_batch` returns random windows for a custom training loop,
:meth:`TokenFile.iter_sequential` covers a split once for evaluation and :class:`TokenWindowDataset` serves fixed
windows to the Hugging Face Trainer.
"""

from __future__ import annotations

from .encode import corpus_stats, encode_corpus, encode_source
from .format import FORMAT_VERSION, HEADER_SIZE, TokenFileError, read_header, split_of, token_dtype
from .read import TokenFile

__all__ = [
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "TokenFileError",
    "token_dtype",
    "split_of",
    "encode_corpus",
    "encode_source",
    "read_header",
    "TokenFile",
    "TokenWindowDataset",
    "corpus_stats",
]


def __getattr__(name: str):
    """``TokenWindowDataset`` is built on first use (it subclasses torch's Dataset; see :mod:`.read`)."""
    if name == "TokenWindowDataset":
        from . import read

        return read.TokenWindowDataset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
