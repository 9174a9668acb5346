"""The deploy recipe (azllm.recipes.deploy): the text the checks read (every line of the eval sets and of both
sides of the parallel pairs), which ids count as new, a model folder deployed once and returned from its
deploy.json the second time, and the rows the page shows."""

import json

import pytest
from sft_helpers import tiny_base  # noqa: F401  (fixture)

from azllm.config import load_params
from conftest import FIXTURES


def _params(**deploy):
    return load_params(
        None,
        overrides={
            "run_name": "dep",
            "data": {
                "root": str(FIXTURES),
                "eval": {"flores": {"path": "data/az/dev/flores200.dev.azj_Latn.txt", "max_lines": 30}},
                "parallel": {
                    "flores": {
                        "az": {"path": "data/az/dev/flores200.dev.azj_Latn.txt", "max_lines": 30},
                        "en": {"path": "data/az/dev/flores200.dev.eng_Latn.txt", "max_lines": 30},
                    }
                },
            },
            "deploy": {"quality_lines": 8, "speed": False, **deploy},
        },
    )


def test_the_checks_read_every_eval_line_and_both_sides_of_each_pair():
    from azllm.recipes.deploy import parity_sets, quality_texts

    cfg = _params()
    sets = parity_sets(cfg)
    assert set(sets) == {"flores", "flores_az", "flores_en"} and all(len(v) == 30 for v in sets.values())
    assert sets["flores_en"][0] != sets["flores_az"][0]
    assert quality_texts(cfg) == sets["flores"][:8]
    assert set(parity_sets(_params(parity_sets=["flores"]))) == {"flores", "flores_az", "flores_en"}  # set + pair


def test_new_ids_are_the_pieces_the_base_lacks(tiny_base, tmp_path):
    from transformers import AutoTokenizer

    from azllm.recipes.deploy import new_ids

    tok = AutoTokenizer.from_pretrained(str(tiny_base))
    n = len(tok)
    tok.add_tokens(["Azərbaycanca", "<|rol|>"])
    ext = tmp_path / "ext"
    tok.save_pretrained(ext)
    assert new_ids(ext, tiny_base) == [n, n + 1] and new_ids(ext, None) is None and new_ids(tiny_base, tiny_base) == []


@pytest.fixture(scope="module")
def bpe_base(tmp_path_factory):
    """A tiny Llama with azllm's SentencePiece BPE tokenizer (sp.model beside tokenizer.json)."""
    from azllm.data import iter_documents, resolve_source
    from azllm.export import copy_tokenizer_files
    from azllm.model import build_model, model_config
    from azllm.tokenizer_train import train_tokenizer
    from conftest import TINY_MODEL

    tmp = tmp_path_factory.mktemp("deploy-bpe")
    docs = list(iter_documents(resolve_source({"path": "data/az/train/*.txt", "max_bytes_per_file": 8000}, FIXTURES)))
    tok = train_tokenizer(docs, tmp / "tok", vocab_size=400, model_type="bpe", num_threads=1)
    build_model(model_config("tiny", 400, **TINY_MODEL), seed=0).save_pretrained(tmp / "model")
    copy_tokenizer_files(tok, tmp / "model")
    return tmp / "model"


def test_a_unigram_tokenizer_is_refused_and_leaves_nothing(tiny_base, tmp_path, monkeypatch):
    """llama.cpp tokenizes SentencePiece models as BPE: a unigram model (the tiny base's) would get other ids."""
    from azllm.deploy import DeployError
    from azllm.recipes.deploy import deploy_model

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    with pytest.raises(DeployError, match="unigram|without tokenizer.model"):
        deploy_model(_params(quants=["F16"]), "tiny", tiny_base)
    assert not list((tmp_path / "art").rglob("*.gguf"))


def test_a_folder_is_deployed_once_and_its_rows_are_the_records(bpe_base, tmp_path, monkeypatch):
    from azllm.recipes.deploy import deploy_model, mismatches, parity_rows, quant_rows, summary

    monkeypatch.setenv("AZLLM_ARTIFACTS", str(tmp_path / "art"))
    cfg = _params(quants=["F16"])  # the quantizations: tests/test_deploy.py
    rec = deploy_model(cfg, "tiny", bpe_base)
    out = tmp_path / "art" / "dep" / "deploy" / "tiny"
    stamp = (out / "model-F16.gguf").stat().st_mtime_ns
    again = deploy_model(cfg, "tiny", bpe_base)  # same weights, same settings: deploy.json as it is
    assert again["key"] == rec["key"] and json.loads((out / "deploy.json").read_text())["name"] == "tiny"
    assert (out / "model-F16.gguf").stat().st_mtime_ns == stamp
    rows = {(r["model"], r["set"]): r for r in parity_rows({"tiny": rec})}
    assert set(rows) == {("tiny", "flores"), ("tiny", "flores_az"), ("tiny", "flores_en")}
    assert all(r["lines"] == 30 and r["equal"] <= 30 for r in rows.values())
    assert len(mismatches({"tiny": rec})) == sum(min(5, 30 - r["equal"]) for r in rows.values())
    files = {r["file"]: r for r in quant_rows({"tiny": rec})}
    assert set(files) == {"F16"} and files["F16"]["bits_per_weight"] > 15 and files["F16"]["vs_pytorch_top1"] > 0.9
    s = summary({"tiny": rec})
    assert s["file"] == "F16" and s["parity_lines"] == 90 and s["size_mb"] == s["f16_size_mb"]
