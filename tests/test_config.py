from pathlib import Path

import pytest

from azllm.config import ParamsError, data_root, load_params, params_hash

REPO = Path(__file__).resolve().parent.parent


def test_every_params_file_loads():
    files = sorted((REPO / "params").glob("*.yaml"))
    assert files
    for f in files:
        p = load_params(f)
        assert p["run_name"]


def test_defaults_filled_and_overrides():
    p = load_params(None, overrides={"tokenizer": {"vocab_size": 8000}})
    assert p["tokenizer"]["vocab_size"] == 8000 and p["tokenizer"]["model_type"] == "unigram"


def test_unknown_key_is_named_with_allowed_keys(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("tokenizer:\n  vocab_sise: 8000\n")
    with pytest.raises(ParamsError) as e:
        load_params(f)
    msg = str(e.value)
    assert "tokenizer.vocab_sise" in msg and "vocab_size" in msg and "allowed keys" in msg


def test_unknown_top_level_key(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("run_nme: x\n")
    with pytest.raises(ParamsError, match="run_nme"):
        load_params(f)


def test_wrong_type(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("seed: abc\n")
    with pytest.raises(ParamsError, match="seed"):
        load_params(f)


def test_secrets_refused(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("data:\n  train:\n    hub: hf_abcdefghijklmnopqrstuvwxyz123\n")
    with pytest.raises(ParamsError, match="token"):
        load_params(f)


def test_hash_is_stable_and_sensitive():
    a = load_params(None)
    b = load_params(None)
    assert params_hash(a) == params_hash(b)
    assert params_hash(a) != params_hash(load_params(None, overrides={"seed": 2}))


def test_data_root_from_params_or_env(monkeypatch, tmp_path):
    monkeypatch.setenv("AZLLM_DATA_ROOT", str(tmp_path))
    assert data_root(load_params(None)) == tmp_path.resolve()
    other = tmp_path / "other"
    assert data_root(load_params(None, overrides={"data": {"root": str(other)}})) == other.resolve()
    monkeypatch.delenv("AZLLM_DATA_ROOT")
    assert data_root(load_params(None)) is None
