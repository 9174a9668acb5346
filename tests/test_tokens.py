"""Token files: encode, header checks, batching, sharding, atomic interrupted runs, the report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from azllm.config import ParamsError, load_params
from azllm.tokenizer import load_tokenizer, train_tokenizer
from azllm.tokens import (HEADER_SIZE, TokenFile, TokenFileError, encode_corpus, read_header, split_of,
                          token_dtype)

from conftest import FIXTURES, TINY_MODEL, run_notebooks

REPO = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def corpus() -> list[str]:
    """~250 KB of the fixture corpus (every file of the shared corpus represented), normalized."""
    from azllm.data import iter_documents, resolve_source

    r = resolve_source({"path": "data/az/train/*.txt", "max_bytes_per_file": 20_000}, FIXTURES)
    return list(iter_documents(r))


@pytest.fixture(scope="session")
def tok(corpus, tmp_path_factory):
    folder = train_tokenizer(corpus, tmp_path_factory.mktemp("tok") / "tok", vocab_size=600, model_type="unigram")
    return load_tokenizer(folder)


@pytest.fixture(scope="session")
def tok2(corpus, tmp_path_factory):
    """Another real tokenizer (other vocab size): its files must be refused by ``tok``."""
    folder = train_tokenizer(corpus, tmp_path_factory.mktemp("tok2") / "tok", vocab_size=500, model_type="unigram")
    return load_tokenizer(folder)


@pytest.fixture(scope="session")
def encoded(corpus, tok, tmp_path_factory):
    out = tmp_path_factory.mktemp("enc")
    r = encode_corpus(corpus, tok, out, val_fraction=0.1, seed=0, progress=False)
    return r


def _word_level(tmp: Path, vocab_size: int):
    """A real HF WordLevel tokenizer with exactly ``vocab_size`` ids (``</s>`` = 2), saved and loaded."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"w{i}": i for i in range(3, vocab_size)})
    t = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tmp.mkdir(parents=True, exist_ok=True)
    t.save(str(tmp / "tokenizer.json"))
    return load_tokenizer(tmp)


def _split_docs(tf: TokenFile) -> list[np.ndarray]:
    ids = np.asarray(tf.tokens)
    ends = np.flatnonzero(ids == tf.eos_id)
    assert ends.size and ends[-1] == ids.size - 1, "every document must end with EOS"
    return np.split(ids, ends + 1)[:-1]


# --------------------------------------------------------------------------------------------------- encode

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


def test_token_dtype_boundary():
    assert token_dtype(1) == np.uint16 and token_dtype(65536) == np.uint16
    assert token_dtype(65537) == np.uint32 and token_dtype(2**32) == np.uint32
    with pytest.raises(ValueError):
        token_dtype(0)


@pytest.mark.parametrize("vocab_size,dtype", [(65536, np.uint16), (65537, np.uint32)])
def test_uint16_uint32_files_at_the_65536_boundary(tmp_path, vocab_size, dtype):
    t = _word_level(tmp_path / "tok", vocab_size)
    assert t.vocab_size == vocab_size and t.eos_id == 2
    top = vocab_size - 1  # 65535 fits uint16; 65536 needs uint32
    docs = [f"w{top} w3 w{top - 1}", "w4", f"w{top}"]
    r = encode_corpus(docs, t, tmp_path / "out", val_fraction=0.0, progress=False)
    tf = TokenFile(r["train"], t)
    assert tf.dtype == dtype and read_header(r["train"])["dtype"] == np.dtype(dtype).name
    assert r["train"].stat().st_size == HEADER_SIZE + tf.n_tokens * np.dtype(dtype).itemsize
    assert np.asarray(tf.tokens).tolist() == [top, 3, top - 1, 2, 4, 2, top, 2]


def test_split_is_deterministic_and_never_leaks(corpus, tok, encoded, tmp_path):
    # duplicates of some documents: they must land in the same split as their twin
    docs = corpus + corpus[::7]
    a = encode_corpus(docs, tok, tmp_path / "a", val_fraction=0.1, progress=False, num_workers=1, chunk_docs=7)
    b = encode_corpus(iter(docs), tok, tmp_path / "b", val_fraction=0.1, progress=False, num_workers=3,
                      chunk_docs=64)
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
    stats = corpus_stats(r, tok)
    total = stats[-1]
    assert total["source"] == "all" and len(stats) == len(r.files) + 1
    assert total["documents"] == len(docs) and total["characters"] == sum(map(len, docs))
    assert total["tokens"] == sum(len(tok.encode(d)) for d in docs) == first["train_tokens"] + first[
        "val_tokens"] - len(docs)
    assert total["tokens_per_word"] == pytest.approx(total["tokens"] / sum(len(d.split()) for d in docs))


# ------------------------------------------------------------------------------------------------- headers

def test_truncated_file_is_refused(encoded, tmp_path):
    data = encoded["train"].read_bytes()
    bad = tmp_path / "train.bin"
    bad.write_bytes(data[:-3])
    with pytest.raises(TokenFileError, match="truncated"):
        TokenFile(bad)
    bad.write_bytes(data[:100])
    with pytest.raises(TokenFileError, match="truncated"):
        TokenFile(bad)
    bad.write_bytes(b"\0" * 2000)
    with pytest.raises(TokenFileError, match="not an azllm token file"):
        TokenFile(bad)
    with pytest.raises(TokenFileError, match="no such token file"):
        TokenFile(tmp_path / "missing.bin")


def test_file_from_another_tokenizer_is_refused(encoded, tok, tok2):
    TokenFile(encoded["train"], tok)
    TokenFile(encoded["train"], fingerprint=tok.fingerprint)
    with pytest.raises(TokenFileError, match="fingerprint"):
        TokenFile(encoded["train"], tok2)
    with pytest.raises(TokenFileError, match="fingerprint"):
        TokenFile(encoded["train"], fingerprint="0" * 64)


# ------------------------------------------------------------------------------------------------ batching

def test_get_batch_shift_and_seed(encoded):
    tf = TokenFile(encoded["train"])
    x, y = tf.get_batch(4, 32, generator=torch.Generator().manual_seed(7))
    assert x.shape == y.shape == (4, 32) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    ix = torch.randint(tf.n_tokens - 32, (4,), generator=torch.Generator().manual_seed(7))
    toks = np.asarray(tf.tokens).astype(np.int64)
    for row, i in enumerate(ix.tolist()):
        assert x[row].tolist() == toks[i:i + 32].tolist() and y[row].tolist() == toks[i + 1:i + 33].tolist()
    x2, y2 = tf.get_batch(4, 32, generator=7)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    x3, _ = tf.get_batch(4, 32, generator=torch.Generator().manual_seed(8))
    assert not torch.equal(x, x3)
    with pytest.raises(TokenFileError, match="fewer than block_size"):
        tf.get_batch(1, tf.n_tokens)


def test_iter_sequential_covers_the_split_once(encoded):
    tf = TokenFile(encoded["val"])
    toks = np.asarray(tf.tokens).astype(np.int64)
    xs, ys = [], []
    for x, y in tf.iter_sequential(3, 50):
        assert x.shape == y.shape and x.dtype == torch.int64 and x.shape[0] <= 3
        assert torch.equal(x[:, 1:], y[:, :-1])
        xs.append(x.reshape(-1))
        ys.append(y.reshape(-1))
    assert torch.cat(ys).tolist() == toks[1:].tolist()
    assert torch.cat(xs).tolist() == toks[:-1].tolist()


def test_dataset_shards_are_disjoint(encoded):
    from azllm.tokens import TokenWindowDataset

    tf = TokenFile(encoded["train"])
    block, world = 64, 3
    full = TokenWindowDataset(tf, block)
    assert isinstance(full, torch.utils.data.Dataset) and len(full) == tf.n_tokens // block
    item = full[5]
    assert item["input_ids"].dtype == torch.int64 and item["input_ids"].shape == (block,)
    assert torch.equal(item["input_ids"], item["labels"])
    assert item["input_ids"].tolist() == np.asarray(tf.tokens[5 * block:6 * block]).tolist()
    shards = [TokenWindowDataset(tf, block, rank=r, world_size=world) for r in range(world)]
    starts = [{s.window_start(i) for i in range(len(s))} for s in shards]
    assert len({len(s) for s in shards}) == 1  # same length on every rank
    for a in range(world):
        for b in range(a + 1, world):
            assert not (starts[a] & starts[b])
    union = set().union(*starts)
    assert len(union) >= len(full) - (world - 1) and union <= {full.window_start(i) for i in range(len(full))}
    for r, s in enumerate(shards):  # the content is the window at that start
        st = s.window_start(1)
        assert s[1]["input_ids"].tolist() == np.asarray(tf.tokens[st:st + block]).tolist()
    shifted = TokenWindowDataset(tf, block, seed=3)
    assert shifted.window_start(0) == 3
    loader = torch.utils.data.DataLoader(shards[1], batch_size=4)
    assert next(iter(loader))["input_ids"].shape == (4, block)
    with pytest.raises(ValueError, match="both rank and world_size"):
        TokenWindowDataset(tf, block, rank=0)
    with pytest.raises(ValueError, match="rank"):
        TokenWindowDataset(tf, block, rank=3, world_size=3)


# ------------------------------------------------------------------------------------------------- atomic

_CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from azllm.tokenizer import load_tokenizer
    from azllm.tokens import encode_corpus
    tok = load_tokenizer(sys.argv[1])
    docs = Path(sys.argv[3]).read_text(encoding="utf-8").splitlines()
    def endless():
        i = 0
        while True:  # never ends: the parent kills this process mid-way
            yield docs[i % len(docs)]
            i += 1
            if i % 200 == 0:
                time.sleep(0.01)
    encode_corpus(endless(), tok, sys.argv[2], chunk_docs=64, num_workers=2, progress=False)
""")


def _kill_mid_encode(tok, out: Path, docs_file: Path) -> None:
    p = subprocess.Popen([sys.executable, "-c", _CHILD, tok.path, str(out), str(docs_file)], stderr=subprocess.PIPE)
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            tmps = list(out.glob(".train.bin.*.tmp"))
            if tmps and tmps[0].stat().st_size > HEADER_SIZE + 100_000:
                break
            assert p.poll() is None, p.stderr.read().decode()[-2000:]
            time.sleep(0.05)
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
    assert list(out.glob(".*.tmp")), "the killed run was writing temporary files"
    for name in ("train.bin", "val.bin", "tokens.json"):
        assert not (out / name).exists()
    r = encode_corpus(corpus, tok, out, progress=False)
    assert not r["skipped"] and not list(out.glob(".*.tmp"))  # the dead run's temporaries are cleaned up
    assert TokenFile(r["train"], tok).n_docs == r["train_docs"]
    before = {n: (out / n).read_bytes() for n in ("train.bin", "val.bin")}
    _kill_mid_encode(tok, out, docs_file)  # a killed re-run leaves the earlier complete files intact
    assert {n: (out / n).read_bytes() for n in ("train.bin", "val.bin")} == before
    again = encode_corpus(corpus, tok, out, progress=False)
    assert again["skipped"] and not list(out.glob(".*.tmp"))


# ------------------------------------------------------------------------------------------ params, report

def _params(tokens: dict):
    return load_params(None, overrides={"tokens": tokens})


def test_params_schema():
    p = _params({"val_fraction": 0.05})
    assert p.tokens.val_fraction == 0.05 and p.tokens.benchmark.scale == 10
    assert p.tokens.num_workers is None and p.tokens.split_seed == 0
    with pytest.raises(ParamsError, match="allowed keys"):
        _params({"val_fracton": 0.05})
    with pytest.raises(ParamsError, match="tokens.val_fraction: Input should be a valid number"):
        _params({"val_fraction": "a lot"})


@pytest.mark.slow
def test_notebook_runs_on_tiny_params(tmp_path, monkeypatch):
    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setenv("AZLLM_DATA_ROOT", str(FIXTURES))
    run_dir, ok = run_notebooks(REPO / "params" / "tiny.yaml", reports_dir=tmp_path / "reports",
                                notebooks=["02_tokens"])
    assert ok, (run_dir / "metrics.json").read_text()[-3000:]
    m = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    stats = m["tokens_corpus"]
    assert stats["all"]["documents"] > 0 and 1.0 < stats["all"]["tokens_per_word"] < 6.0
    assert m["tokens_split"]["train_tokens"] > m["tokens_split"]["val_tokens"] > 0
    bench = m["tokens_benchmark"]
    assert bench["c@1"]["tokens_per_s"] > 0 and "c_rss_growth_1x_to_Nx_mb" in bench["ratios"]
    assert (run_dir / "02_tokens.html").is_file()


def test_hf_trainer_consumes_the_dataset(encoded, tmp_path):
    """The real Hugging Face Trainer takes the windows as they are (default collator, the model shifts)."""
    from transformers import Trainer, TrainingArguments

    from azllm.tokens import TokenWindowDataset

    tf = TokenFile(encoded["train"])
    torch.manual_seed(0)
    from azllm.model import build_model, model_config

    model = build_model(model_config("tiny", tf.vocab_size, **TINY_MODEL), seed=0)
    args = TrainingArguments(output_dir=str(tmp_path / "o"), max_steps=2, per_device_train_batch_size=4,
                             report_to=[], save_strategy="no", logging_steps=1, use_cpu=True,
                             dataloader_num_workers=0, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=TokenWindowDataset(tf, 32))
    out = trainer.train()
    assert out.global_step == 2 and np.isfinite(out.training_loss) and out.training_loss > 0
