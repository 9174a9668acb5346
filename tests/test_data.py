import json

import pytest

from azllm.config import load_params
from azllm.data import DataError, file_sha256, iter_documents, read_lines, resolve_source
from azllm.recipes.corpus import eval_sets


def test_local_txt_documents_are_normalized_lines(tmp_path):
    (tmp_path / "a.txt").write_text("Az\u04d9rbaycan\n\n  Bakı  şəhəri \n", encoding="utf-8")
    r = resolve_source({"path": "*.txt"}, tmp_path)
    assert r.kind == "files"
    assert list(iter_documents(r)) == ["Azərbaycan", "Bakı şəhəri"]


def test_jsonl_and_parquet_through_the_same_function(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in ["bir", "iki"]), encoding="utf-8")
    pq.write_table(pa.table({"text": ["üç", "dörd"]}), tmp_path / "d.parquet")
    assert list(iter_documents(resolve_source({"path": "d.jsonl"}, tmp_path))) == ["bir", "iki"]
    assert list(iter_documents(resolve_source({"path": "d.parquet"}, tmp_path))) == ["üç", "dörd"]
    with pytest.raises(DataError, match="no field 'body'"):
        list(iter_documents(resolve_source({"path": "d.jsonl", "text_field": "body"}, tmp_path)))


def test_hub_code_path_on_a_local_dataset(tmp_path):
    """The hub branch calls datasets.load_dataset(id, config, split, streaming=True); a local folder id runs the
    same call offline."""
    ds = tmp_path / "my_dataset"
    ds.mkdir()
    (ds / "train.jsonl").write_text("\n".join(json.dumps({"text": f"sənəd {i}"}) for i in range(50)), encoding="utf-8")
    r = resolve_source({"path": "missing/*.txt", "hub": str(ds), "split": "train", "max_lines": 7}, tmp_path)
    assert r.kind == "hub"
    docs = list(iter_documents(r))
    assert docs == [f"sənəd {i}" for i in range(7)]


def test_caps(tmp_path):
    (tmp_path / "a.txt").write_text("\n".join(["abcd"] * 10), encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n".join(["efgh"] * 10), encoding="utf-8")
    assert len(list(iter_documents(resolve_source({"path": "*.txt", "max_bytes": 10}, tmp_path)))) == 2
    per_file = list(iter_documents(resolve_source({"path": "*.txt", "max_bytes_per_file": 8}, tmp_path)))
    assert per_file == ["abcd", "abcd", "efgh", "efgh"]


def test_skip_lines_leaves_a_sets_first_records_to_another_split(tmp_path):
    """``skip_lines``: the first records of the source as a whole (across its files, before any cap), in
    iter_documents and in source_lines (which keeps empty lines, so parallel sides stay aligned)."""
    from azllm.data import source_lines

    (tmp_path / "a.txt").write_text("bir\niki\n\nüç\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("dörd\nbeş\n", encoding="utf-8")
    src = {"path": "*.txt", "skip_lines": 2}
    assert list(iter_documents(resolve_source(src, tmp_path))) == ["üç", "dörd", "beş"]
    assert list(iter_documents(resolve_source({**src, "skip_lines": 4, "max_lines": 1}, tmp_path))) == ["dörd"]
    assert source_lines(resolve_source(src, tmp_path)) == ["", "üç", "dörd", "beş"]
    with pytest.raises(DataError, match="empty corpus"):
        list(iter_documents(resolve_source({**src, "skip_lines": 6}, tmp_path)))


def test_a_skipped_eval_split_is_still_kept_out_of_training(data_root):
    """The selection part of FLORES (``skip_lines``) is what the eval sets read; decontamination reads every
    line; the corpus stage refuses skip_lines on its input."""
    from azllm.recipes.corpus import held_out_lines, run_corpus

    flores = {"path": "data/az/dev/flores200.dev.azj_Latn.txt", "skip_lines": 150}
    p = load_params(None, overrides={"data": {"root": str(data_root), "eval": {"flores": flores}, "parallel": {}}})
    evals, _, _ = eval_sets(p)
    whole, _, _ = eval_sets(p, whole=True)
    assert len(evals["flores"]) == 50 and evals["flores"] == whole["flores"][150:] and len(whole["flores"]) == 200
    assert held_out_lines(p)["flores"] == whole["flores"]
    bad = load_params(None, overrides={"data": {"root": str(data_root), "train": {"skip_lines": 3}}})
    with pytest.raises(ValueError, match="data.train.skip_lines: the corpus stage reads every line"):
        run_corpus(bad)


def test_empty_corpus_is_a_clear_error(tmp_path):
    (tmp_path / "empty.txt").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(DataError, match="empty corpus"):
        list(iter_documents(resolve_source({"path": "empty.txt"}, tmp_path)))


def test_non_utf8_names_file_and_byte_offset(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_bytes("Salam\nBakı ".encode() + b"\xff\xfe" + b" son\n")
    with pytest.raises(DataError) as e:
        list(read_lines(f))
    assert "bad.txt" in str(e.value) and "byte offset 12" in str(e.value) and "line 2" in str(e.value)


def test_missing_source_says_what_was_tried(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        resolve_source({"path": "nope/*.txt"}, tmp_path)
    with pytest.raises(DataError, match="no data root"):
        resolve_source({"path": "nope/*.txt"}, None)


def test_sha256(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(b"abc")
    assert file_sha256(f) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_eval_sets_are_parallel(data_root):
    p = load_params(
        None,
        overrides={
            "data": {"root": str(data_root), "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt"}}}
        },
    )
    evals, par, res = eval_sets(p)
    assert len(evals["flores"]) == 200 and len(par["flores"][0]) == len(par["flores"][1]) == 200
    assert all(len(v) == 64 for v in res["eval.flores"].sha256s().values())
    bad = load_params(
        None,
        overrides={
            "data": {
                "root": str(data_root),
                "parallel": {
                    "flores": {
                        "az": {"path": "data/az/dev/flores200.dev.azj_Latn.txt"},
                        "en": {"path": "data/az/dev/flores200.dev.eng_Latn.txt", "max_lines": 10},
                    }
                },
            }
        },
    )
    with pytest.raises(DataError, match="200 Azerbaijani lines but 10 English lines"):
        eval_sets(bad)


@pytest.mark.parametrize("kind", ["txt", "jsonl", "parquet"])
def test_the_pieces_of_a_file_give_each_document_once_in_order(tmp_path, kind):
    """A file cut into 1-7 pieces (byte ranges at line starts; parquet row groups): the pieces together give the
    documents of :func:`iter_documents`, in order, each once, with their byte offsets (rows for parquet)."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    from azllm.data import iter_file_part

    rng = random.Random(0)
    words = ["Bakı", "şəhəri", "ölkə", "İçərişəhər", "Gəncə", "dağ", "çay", "", "  "]
    docs = [" ".join(rng.choices(words, k=rng.randint(0, 40))) for _ in range(400)]
    path = tmp_path / f"c.{kind}"
    if kind == "txt":
        path.write_text("\n".join(docs) + "\n", encoding="utf-8")
    elif kind == "jsonl":
        path.write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    else:
        pq.write_table(pa.table({"text": docs}), path, row_group_size=37)
    want = list(iter_documents(resolve_source({"path": str(path)}, None)))
    raw = path.read_bytes()
    for parts in range(1, 8):
        got = [x for k in range(parts) for x in iter_file_part(path, k, parts)]
        assert [d for _, d in got] == want, parts
        positions = [p for p, _ in got]
        assert positions == sorted(set(positions))
        if kind == "txt":
            assert all(p == 0 or raw[p - 1 : p] == b"\n" for p in positions)
