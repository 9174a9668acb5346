"""Encoding a corpus into token files (azllm.tokens.encode): the round trip, the per-document split, a skipped
re-run, bad input, the source reader and corpus statistics, an interrupted run."""

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from tokens_helpers import REPO, _split_docs, _word_level, corpus, encoded, tok, tok2  # noqa: F401

from azllm.tokens import TokenFile, TokenFileError, encode_corpus, split_of
from conftest import FIXTURES


def test_round_trip_equals_documents_joined_by_eos(corpus, tok, encoded):
    for split in ("train", "val"):
        tf = TokenFile(encoded[split], tok)
        want = [d for d in corpus if split_of(d, 0.1, 0) == split]
        got = [tok.decode(d[:-1].tolist()) for d in _split_docs(tf)]
        assert got == want
        assert tf.n_docs == len(want) == encoded[f"{split}_docs"]
        assert tf.n_tokens == encoded[f"{split}_tokens"] == sum(len(tok.encode(d)) + 1 for d in want)
    assert encoded["backend"] == "sentencepiece"  # the folder's sp.model engine, checked equal to tokenizer.json
    assert tf.dtype == np.uint16 and encoded["dtype"] == "uint16"


def test_split_is_deterministic_and_never_leaks(corpus, tok, encoded, tmp_path):
    # duplicates of some documents: they must land in the same split as their twin
    docs = corpus + corpus[::7]
    a = encode_corpus(docs, tok, tmp_path / "a", val_fraction=0.1, progress=False, num_workers=1, chunk_docs=7)
    b = encode_corpus(iter(docs), tok, tmp_path / "b", val_fraction=0.1, progress=False, num_workers=3, chunk_docs=64)
    for s in ("train", "val"):  # byte-identical whatever the chunking and the threads
        assert a[s].read_bytes() == b[s].read_bytes()
    train = {tok.decode(d[:-1].tolist()) for d in _split_docs(TokenFile(a["train"]))}
    val = {tok.decode(d[:-1].tolist()) for d in _split_docs(TokenFile(a["val"]))}
    assert train and val and not (train & val)
    assert train | val == set(docs)
    assert 0.04 < a["val_docs"] / (a["train_docs"] + a["val_docs"]) < 0.2
    # the split depends on the seed and the fraction only
    other = [split_of(d, 0.1, seed=1) for d in corpus]
    assert other != [split_of(d, 0.1, seed=0) for d in corpus]
    assert all(split_of(d, 0.0) == "train" and split_of(d, 1.0) == "val" for d in corpus[:50])


def test_rerun_is_skipped_by_fingerprint(corpus, tok, tok2, tmp_path):
    out = tmp_path / "t"
    first = encode_corpus(corpus, tok, out, progress=False)
    assert not first["skipped"]
    mtime = first["train"].stat().st_mtime_ns
    again = encode_corpus(corpus, tok, out, progress=False)  # re-iterable: hash-only pass
    assert again["skipped"] and again["key"] == first["key"]
    assert first["train"].stat().st_mtime_ns == mtime

    def must_not_read():
        raise AssertionError("the inputs pre-check should have skipped reading the documents")
        yield  # pragma: no cover

    encode_corpus(corpus, tok, out, inputs={"files": "v1"}, progress=False)  # records the inputs key
    assert encode_corpus(must_not_read(), tok, out, inputs={"files": "v1"}, progress=False)["skipped"]
    changed = encode_corpus(corpus[:-1], tok, out, progress=False)  # one document less: redone
    assert not changed["skipped"] and changed["key"] != first["key"]
    assert TokenFile(changed["train"]).n_docs + TokenFile(changed["val"]).n_docs == len(corpus) - 1
    other = encode_corpus(corpus, tok2, out, progress=False)  # another tokenizer: redone
    assert not other["skipped"] and TokenFile(other["train"], tok2).vocab_size == tok2.vocab_size
    # a one-shot generator of the same documents: encoded again, files left untouched
    mtime = other["train"].stat().st_mtime_ns
    gen = encode_corpus((d for d in corpus), tok2, out, progress=False)
    assert gen["key"] == other["key"] and other["train"].stat().st_mtime_ns == mtime


def test_bad_inputs_get_clear_errors(tok, tmp_path):
    with pytest.raises(TokenFileError, match="empty corpus"):
        encode_corpus(["", ""], tok, tmp_path / "e", progress=False)
    with pytest.raises(ValueError, match="val_fraction"):
        encode_corpus(["x"], tok, tmp_path / "e", val_fraction=1.5, progress=False)
    with pytest.raises(TypeError, match="must be str"):
        encode_corpus([b"bytes"], tok, tmp_path / "e", progress=False)
    assert not list((tmp_path / "e").glob("*.bin")) and not list((tmp_path / "e").glob(".*.tmp"))


def test_encode_source_and_corpus_stats(tok, tmp_path):
    from azllm.data import iter_documents, resolve_source
    from azllm.tokens import corpus_stats, encode_source

    r = resolve_source({"path": "data/az/train/*.txt", "max_bytes_per_file": 5_000}, FIXTURES)
    docs = list(iter_documents(r))
    first = encode_source(r, tok, tmp_path / "t", progress=False)
    assert not first["skipped"] and first["train_docs"] + first["val_docs"] == len(docs)
    assert encode_source(r, tok, tmp_path / "t", progress=False)["skipped"]  # by the files' sha256s
    skip = resolve_source({"path": "data/az/train/*.txt", "max_bytes_per_file": 5_000, "skip_lines": 3}, FIXTURES)
    later = encode_source(skip, tok, tmp_path / "t", progress=False)  # other lines: encoded again, not reused
    assert not later["skipped"] and later["train_docs"] + later["val_docs"] == len(list(iter_documents(skip)))
    stats = corpus_stats(r, tok)
    total = stats[-1]
    assert total["source"] == "all" and len(stats) == len(r.files) + 1
    assert total["documents"] == len(docs) and total["characters"] == sum(map(len, docs))
    assert (
        total["tokens"]
        == sum(len(tok.encode(d)) for d in docs)
        == first["train_tokens"] + first["val_tokens"] - len(docs)
    )
    assert total["tokens_per_word"] == pytest.approx(total["tokens"] / sum(len(d.split()) for d in docs))


_CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from azllm.tokenizer import load_tokenizer
    from azllm.tokens import encode_corpus
    tok = load_tokenizer(sys.argv[1])
    docs = Path(sys.argv[3]).read_text(encoding="utf-8").splitlines()
    repeat = int(sys.argv[4])
    def slow():
        for i in range(len(docs) * repeat):  # slowed down: the parent kills this process mid-way
            yield docs[i % len(docs)]
            if i % 200 == 0:
                time.sleep(0.01)
    encode_corpus(slow(), tok, sys.argv[2], chunk_docs=64, num_workers=2, part_chars=40_000, progress=False)
""")


def _kill_mid_encode(tok, out: Path, docs_file: Path, *, parts: int = 0, repeat: int = 1000) -> None:
    """Start an encoding process and SIGKILL it once ``parts`` parts are complete and the next part's temporary ids
    pass 1 KB (``parts=0``) or exist."""
    args = [sys.executable, "-c", _CHILD, tok.path, str(out), str(docs_file), str(repeat)]
    p = subprocess.Popen(args, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            done = len(list(out.glob(".parts/*/part-*.json")))
            sizes = []
            for t in out.glob(".parts/*/.part-*.train.bin.*.tmp"):
                try:
                    sizes.append(t.stat().st_size)
                except FileNotFoundError:  # renamed into its part meanwhile
                    pass
            if sizes and done >= parts and (parts or max(sizes) > 1000):
                break
            assert p.poll() is None, p.stderr.read().decode()[-2000:]
            time.sleep(0.02)
        else:
            raise AssertionError("the child never wrote its temporary file")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert p.returncode == -signal.SIGKILL


def test_interrupted_encode_leaves_no_final_file_and_rerun_completes(corpus, tok, tmp_path):
    docs_file = tmp_path / "docs.txt"
    docs_file.write_text("\n".join(corpus), encoding="utf-8")
    out = tmp_path / "out"
    _kill_mid_encode(tok, out, docs_file)
    assert list(out.glob(".parts/*/.*.tmp")), "the killed run was writing temporary files"
    for name in ("train.bin", "val.bin", "train.idx", "tokens.json"):
        assert not (out / name).exists()
    r = encode_corpus(corpus, tok, out, progress=False)
    assert not r["skipped"] and not list(out.rglob(".*.tmp"))  # the dead run's temporaries are cleaned up
    assert not (out / ".parts").exists()
    assert TokenFile(r["train"], tok).n_docs == r["train_docs"]
    before = {n: (out / n).read_bytes() for n in ("train.bin", "val.bin", "train.idx", "val.idx")}
    _kill_mid_encode(tok, out, docs_file)  # a killed re-run leaves the earlier complete files intact
    assert {n: (out / n).read_bytes() for n in before} == before
    again = encode_corpus(corpus, tok, out, progress=False)
    assert again["skipped"] and not list(out.glob(".*.tmp"))


def _slow_docs(corpus: list[str], repeat: int) -> list[str]:
    return [corpus[i % len(corpus)] for i in range(len(corpus) * repeat)]


def test_killed_encode_resumes_to_byte_identical_files(corpus, tok, tmp_path):
    docs_file = tmp_path / "docs.txt"
    docs_file.write_text("\n".join(corpus), encoding="utf-8")
    docs = _slow_docs(corpus, 3)
    kw = dict(chunk_docs=64, num_workers=2, part_chars=40_000, progress=False)
    whole = encode_corpus(docs, tok, tmp_path / "whole", **kw)
    out = tmp_path / "resumed"
    _kill_mid_encode(tok, out, docs_file, parts=3, repeat=3)
    done = len(list(out.glob(".parts/*/part-*.json")))
    assert done >= 3
    r = encode_corpus(docs, tok, out, **kw)
    assert done <= r["resumed_parts"] < json.loads((out / "tokens.json").read_text())["parts"]
    for name in ("train.bin", "val.bin", "train.idx", "val.idx"):
        assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    assert r["key"] == whole["key"] and not (out / ".parts").exists()


def test_changed_input_is_encoded_again_from_the_first_changed_part(corpus, tok, tmp_path):
    docs = _slow_docs(corpus, 2)
    kw = dict(chunk_docs=64, num_workers=1, part_chars=40_000, progress=False)

    def dying(items, stop):
        for i, d in enumerate(items):
            if i == stop:
                raise KeyboardInterrupt
            yield d

    out = tmp_path / "t"
    with pytest.raises(KeyboardInterrupt):
        encode_corpus(dying(docs, len(docs) // 2), tok, out, **kw)
    held = len(list(out.glob(".parts/*/part-*.json")))
    assert held >= 2
    first = json.loads(next(out.glob(".parts/*/part-00000.json")).read_text())
    in_first = first["train"]["n_docs"] + first["val"]["n_docs"]
    changed = list(docs)
    changed[in_first + 1] = "Tamamilə başqa bir sənəd."  # in the second part
    r = encode_corpus(changed, tok, out, **kw)
    fresh = encode_corpus(changed, tok, tmp_path / "fresh", **kw)
    assert r["resumed_parts"] == 1 < held
    assert (out / "train.bin").read_bytes() == fresh["train"].read_bytes()


def test_document_index_marks_every_document_end(tok, encoded, tmp_path):
    import shutil

    for split in ("train", "val"):
        tf = TokenFile(encoded[split], tok)
        ends = tf.doc_ends()
        assert len(ends) == tf.n_docs and int(ends[-1]) == tf.n_tokens
        assert (np.asarray(tf.tokens)[ends.astype(np.int64) - 1] == tok.eos_id).all()
        assert [len(d) for d in _split_docs(tf)] == np.diff(np.concatenate([[0], ends])).tolist()
    copy = shutil.copy(encoded["train"], tmp_path / "train.bin")  # a truncated index is refused
    (tmp_path / "train.idx").write_bytes(Path(encoded["train_index"]).read_bytes()[:-8])
    with pytest.raises(TokenFileError, match="re-encode"):
        TokenFile(copy, tok).doc_ends()
