import hashlib
from pathlib import Path

import pytest

from azllm.data import iter_documents, resolve_source
from azllm.metrics import hf_id_mismatches, tokenizer_metrics
from azllm.text import normalize
from azllm.tokenizer import TokenizerError, load_tokenizer
from azllm.tokenizer_train import VocabTooLargeError, train_tokenizer, training_seconds


@pytest.fixture(scope="module")
def docs(data_root):
    return list(
        iter_documents(resolve_source({"path": "data/az/train/*.txt", "max_bytes_per_file": 40_000}, data_root))
    )


@pytest.fixture(scope="module")
def dev_lines(data_root):
    d = data_root / "data/az/dev"
    return [
        normalize(x)
        for f in ("flores200.dev.azj_Latn.txt", "xwmt.test.az.txt", "flores200.dev.eng_Latn.txt")
        for x in (d / f).read_text(encoding="utf-8").splitlines()
        if x.strip()
    ]


@pytest.fixture(scope="module")
def trained(docs, tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    return {mt: train_tokenizer(docs, root / mt, vocab_size=1000, model_type=mt) for mt in ("unigram", "bpe")}


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.parametrize("mt", ["unigram", "bpe"])
def test_hf_export_loads_offline_and_matches_sentencepiece_ids(trained, dev_lines, mt):
    from transformers import AutoTokenizer

    folder = trained[mt]
    hf = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    assert (hf.unk_token, hf.bos_token, hf.eos_token, hf.pad_token) == ("<unk>", "<s>", "</s>", "<pad>")
    assert (hf.unk_token_id, hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (0, 1, 2, 3)
    if mt == "bpe":
        assert hf_id_mismatches(folder, dev_lines) == 0
    else:  # unigram: only equal-score permutations ("000" as 00|0 vs 0|00) may differ, see hf_id_mismatches
        assert hf_id_mismatches(folder, dev_lines, allow_ties=True) == 0
        assert hf_id_mismatches(folder, dev_lines) <= 0.01 * len(dev_lines)


@pytest.mark.parametrize("mt", ["unigram", "bpe"])
def test_lossless_round_trip_on_dev_sets(trained, dev_lines, mt):
    for spec in (trained[mt], trained[mt] / "sp.model"):
        tok = load_tokenizer(spec)
        assert all(tok.decode(tok.encode(x)) == x for x in dev_lines)
    # byte fallback: characters never seen in training survive too
    tok = load_tokenizer(trained[mt])
    exotic = "Ωμέγα 漢字 🙂 ə"
    assert tok.decode(tok.encode(exotic)) == exotic


def test_training_is_deterministic_and_idempotent(docs, tmp_path):
    a = train_tokenizer(docs, tmp_path / "a", vocab_size=800, model_type="unigram", affix_presplit=True)
    b = train_tokenizer(docs, tmp_path / "b", vocab_size=800, model_type="unigram", affix_presplit=True)
    for f in ("sp.model", "tokenizer.json"):
        assert _sha(a / f) == _sha(b / f)
    mtime = (a / "sp.model").stat().st_mtime_ns
    assert train_tokenizer(docs, tmp_path / "a", vocab_size=800, model_type="unigram", affix_presplit=True) == a
    assert (a / "sp.model").stat().st_mtime_ns == mtime  # reused, not retrained
    c = train_tokenizer(
        docs, tmp_path / "a", vocab_size=800, model_type="unigram", affix_presplit=True, seed=7
    )  # options changed
    assert (c / "azllm_tokenizer.json").read_text() != "" and (a / "sp.model").stat().st_mtime_ns != mtime
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folders left


def test_a_model_noted_in_reuse_is_copied_into_another_folder_not_trained_again(docs, tmp_path, monkeypatch):
    """With ``reuse``, the same corpus and options asked for in a second folder give the first folder's files,
    byte for byte, without a SentencePiece training; other options, or a first folder that no longer holds the
    model, are trained. Both folders report the first training's seconds."""
    import azllm.tokenizer_train as tt

    notes, opts = tmp_path / "notes", {"vocab_size": 800, "model_type": "bpe"}
    a = train_tokenizer(docs, tmp_path / "a", reuse=notes, **opts)
    trainings = []
    run = tt._run_sentencepiece
    monkeypatch.setattr(tt, "_run_sentencepiece", lambda *a, **k: (trainings.append(a[1]), run(*a, **k))[1])
    b = train_tokenizer(docs, tmp_path / "b", reuse=notes, **opts)
    assert trainings == [] and sorted(p.name for p in b.iterdir()) == sorted(p.name for p in a.iterdir())
    assert all(_sha(b / f.name) == _sha(f) for f in a.iterdir())
    assert load_tokenizer(b).encode("Evlərimizdən çıxdıq.") == load_tokenizer(a).encode("Evlərimizdən çıxdıq.")
    assert training_seconds(a, notes) == training_seconds(b, notes) > 0
    assert training_seconds(a, tmp_path / "elsewhere") is None
    train_tokenizer(docs, tmp_path / "c", reuse=notes, **{**opts, "vocab_size": 700})  # other options
    assert len(trainings) == 1
    (a / "sp.model").unlink()  # the noted folder lost its model: trained again, and noted again
    train_tokenizer(docs, tmp_path / "d", reuse=notes, **opts)
    assert len(trainings) == 2 and _sha(tmp_path / "d" / "sp.model") == _sha(b / "sp.model")
    train_tokenizer(docs, tmp_path / "e", reuse=notes, **opts)
    assert len(trainings) == 2  # copied from d
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_affix_presplit_aligns_tokens_with_suffixes(docs, trained, dev_lines, tmp_path):
    """With the pre-split, far more predicted suffix boundaries become token boundaries (on held-out text)."""
    import sentencepiece as spm

    affix = train_tokenizer(docs, tmp_path / "affix", vocab_size=1000, model_type="unigram", affix_presplit=True)
    proto = spm.SentencePieceProcessor(model_file=str(affix / "sp.model"))
    assert all("\x1f" not in proto.id_to_piece(i) for i in range(proto.get_piece_size()))
    lines = dev_lines[:400]
    plain = tokenizer_metrics(load_tokenizer(trained["unigram"]), lines)
    split = tokenizer_metrics(load_tokenizer(affix), lines)
    assert split["morph_recall"] > plain["morph_recall"] + 0.15
    assert split["roundtrip"] == 1.0


@pytest.mark.parametrize("mt", ["unigram", "bpe"])
def test_vocab_too_large_is_a_clear_error(docs, tmp_path, mt):
    with pytest.raises(VocabTooLargeError) as e:
        train_tokenizer(docs[:40], tmp_path / "x", vocab_size=30000, model_type=mt)
    assert e.value.max_vocab_size is not None and 0 < e.value.max_vocab_size < 30000
    assert f"largest size that works for this corpus is {e.value.max_vocab_size}" in str(e.value)
    assert not (tmp_path / "x").exists()


def test_empty_corpus(tmp_path):
    with pytest.raises(TokenizerError, match="empty corpus"):
        train_tokenizer(["", "   "], tmp_path / "x", vocab_size=100, model_type="bpe")


@pytest.mark.needs_shared
@pytest.mark.needs_shared
def test_sweep_reports_variants_the_corpus_cannot_fill(docs, tmp_path):
    from azllm.tokenizer_train import train_sweep

    opts = [dict(vocab_size=500, model_type="bpe"), dict(vocab_size=40000, model_type="bpe")]
    trained, skipped = train_sweep(docs[:200], tmp_path, opts, progress=False)
    assert list(trained) == ["bpe-500"] and list(skipped) == ["bpe-40k"]
    assert "largest size that works" in skipped["bpe-40k"]


def test_vocab_smaller_than_the_characters_is_our_clear_error(docs, tmp_path):
    from azllm.tokenizer_train import VocabTooSmallError

    with pytest.raises(VocabTooSmallError, match=r"vocab_size=300 is too small.*at least (\d+) ids") as e:
        train_tokenizer(docs, tmp_path / "x", vocab_size=300, model_type="bpe")
    assert e.value.minimum > 300
    assert train_tokenizer(docs, tmp_path / "y", vocab_size=e.value.minimum, model_type="bpe").is_dir()


def test_fit_line_keeps_every_character_in_lines_sentencepiece_reads():
    """A document past SentencePiece's line limit is split, never dropped: whole sentences while they fit, then
    spaces, then characters; every line is within the limit and the lines joined give the document back."""
    from azllm.tokenizer_train import fit_line

    doc = " ".join(f"Maddə {i}. Bu qanun {i}-ci ildə qəbul edilib və dərhal qüvvəyə minir." for i in range(3000))
    lines = fit_line(doc, max_bytes=4096)
    assert len(lines) > 40 and all(len(x.encode()) <= 4096 for x in lines)
    assert " ".join(lines) == doc and all(x.endswith(".") for x in lines)  # cut at sentence ends
    word = "ə" * 5000  # 10,000 bytes without a space
    assert "".join(fit_line(word, max_bytes=4096)) == word
    assert fit_line("Qısa cümlə.") == ["Qısa cümlə."]


def test_a_document_longer_than_a_sentencepiece_line_is_trained_on(docs, tmp_path):
    """A 300 KB document (a long law on one line) shapes the vocabulary: its word becomes a piece. SentencePiece
    skips lines over 64 KB silently, so before the split this document was lost to training."""
    long_doc = " ".join(["Zümrüdqalası yaxındadır."] * 12_000)
    assert len(long_doc.encode()) > 1 << 18
    folder = train_tokenizer([*docs[:200], long_doc], tmp_path / "t", vocab_size=600, model_type="bpe")
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(folder / "sp.model"))
    assert sp.piece_to_id("▁Zümrüdqalası") != sp.unk_id()


def test_training_lines_are_sentences_so_the_sample_bounds_memory(docs, tmp_path):
    """SentencePiece samples and holds ``input_sentence_size`` lines: lines are sentences, not documents, so a
    corpus of long documents does not make the sample (and the memory) grow with it."""
    import json

    doc = " ".join(f"Cümlə nömrə {i} buradadır." for i in range(50))
    folder = train_tokenizer([*docs[:100], doc], tmp_path / "t", vocab_size=500, model_type="unigram")
    meta = json.loads((folder / "azllm_tokenizer.json").read_text())
    from azllm.corpus.mix import split_sentences

    want = sum(len(split_sentences(d.replace("\n", " ").strip())) for d in [*docs[:100], doc] if d.strip())
    assert meta["corpus_lines"] >= want - 5 > 100 + 40


def test_one_seeded_sample_bounds_the_lines_and_is_kept(docs, tmp_path):
    from azllm.tokenizer_train import read_lines, training_lines, write_sample

    every = list(training_lines(docs))
    a = write_sample(docs, tmp_path / "a.txt", max_lines=500, seed=1)
    lines = list(read_lines(tmp_path / "a.txt"))
    assert a["lines"] == len(lines) == 500 < a["input_lines"] == len(every)
    pos = [every.index(x) for x in lines[:50]]
    assert pos == sorted(pos)  # in input order
    write_sample(iter(docs), tmp_path / "b.txt", max_lines=500, seed=1)
    write_sample(docs, tmp_path / "c.txt", max_lines=500, seed=2)
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes() != (tmp_path / "c.txt").read_bytes()
    stamp = (tmp_path / "a.txt").stat().st_mtime_ns
    assert write_sample(docs, tmp_path / "a.txt", max_lines=500, seed=1) == a  # the same input: kept
    assert (tmp_path / "a.txt").stat().st_mtime_ns == stamp
    assert write_sample(docs, tmp_path / "d.txt", max_lines=0)["lines"] == len(every)


def test_the_sweep_trains_every_variant_on_one_sample(docs, tmp_path):
    import json

    from azllm.tokenizer_train import train_sweep

    opts = [{"vocab_size": v, "model_type": "unigram", "input_sentence_size": 400, "seed": 0} for v in (450, 500)]
    trained, skipped = train_sweep(docs, tmp_path, opts, progress=False)
    assert len(trained) == 2 and not skipped
    meta = json.loads((tmp_path / "sample.txt.json").read_text())
    assert meta["lines"] == 400
    for folder in trained.values():
        assert json.loads((folder / "azllm_tokenizer.json").read_text())["corpus_lines"] == 400
    with pytest.raises(TokenizerError, match="one sample"):
        train_sweep(docs, tmp_path, [opts[0], {**opts[1], "seed": 1}], progress=False)
