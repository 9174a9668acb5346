from pathlib import Path

import pytest
from pydantic import BaseModel

from azllm.config import Config, ParamsError, load_params
from azllm.recipes.paths import Paths

REPO = Path(__file__).resolve().parent.parent


def test_every_params_file_loads():
    files = sorted((REPO / "params").glob("*.yaml"))
    assert files
    for f in files:
        assert isinstance(load_params(f), Config) and load_params(f).run_name


def test_default_params_file_holds_only_what_differs():
    """params/default.yaml is the defaults (the typed config is the one place they live), plus the mix of the
    shared corpus and the one-at-a-time changes that name its sources, which only make sense for that data."""
    cfg, defaults = load_params(REPO / "params/default.yaml"), load_params(None)
    shipped = {c.name: c for c in cfg.tokenizer.sweep.one_at_a_time}
    generic = defaults.tokenizer.sweep.one_at_a_time  # the file adds the changes that name the corpus's sources
    assert [shipped.get(c.name) for c in generic] == generic and len(shipped) > len(generic)
    sweep = cfg.tokenizer.sweep.model_copy(update={"one_at_a_time": generic})
    tokenizer = cfg.tokenizer.model_copy(update={"sweep": sweep})
    assert cfg.model_copy(update={"corpus": defaults.corpus, "tokenizer": tokenizer}) == defaults
    assert cfg.corpus.model_copy(update={"mix": defaults.corpus.mix}) == defaults.corpus


def test_every_field_is_documented():
    def walk(cls, where):
        for name, f in cls.model_fields.items():
            assert f.description, f"{where}.{name} has no docstring"
            ann = f.annotation
            inner = getattr(ann, "__args__", (ann,))[-1] if getattr(ann, "__origin__", None) is dict else ann
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                walk(inner, f"{where}.{name}")
                seen.add(inner)

    seen = set()
    walk(Config, "params")
    assert len(seen) >= 15  # every section was visited


def test_defaults_filled_and_overrides():
    p = load_params(None, overrides={"tokenizer": {"vocab_size": 16000}})
    assert p.tokenizer.vocab_size == 16000 and p.tokenizer.model_type == "bpe" and p.train.lr == 3e-3


def test_user_maps_replace_the_default_map():
    p = load_params(None, overrides={"baselines": {"gpt2": {"path": "tokenizers/gpt2"}}})
    assert list(p.baselines) == ["gpt2"] and p.baselines["gpt2"].hub is None


def test_unknown_key_is_named_with_allowed_keys(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("tokenizer:\n  vocab_sise: 8000\n")
    with pytest.raises(ParamsError) as e:
        load_params(f)
    msg = str(e.value)
    assert "tokenizer.vocab_sise" in msg and "vocab_size" in msg and "allowed keys in tokenizer" in msg


def test_unknown_key_inside_a_user_map(tmp_path):
    with pytest.raises(
        ParamsError,
        match=r"baselines\.gpt2\.pth; allowed keys in baselines\.gpt2: hub, path, "
        r"tiktoken",
    ):
        load_params(None, overrides={"baselines": {"gpt2": {"pth": "x"}}})


def test_unknown_top_level_key(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("run_nme: x\n")
    with pytest.raises(ParamsError, match="run_nme"):
        load_params(f)


def test_wrong_type(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("seed: abc\n")
    with pytest.raises(ParamsError, match="seed: Input should be a valid integer"):
        load_params(f)
    with pytest.raises(ParamsError, match="model.dtype: Input should be 'fp32', 'bf16' or 'fp16'"):
        load_params(None, overrides={"model": {"dtype": "float32"}})


def test_secrets_refused(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("data:\n  train:\n    hub: hf_abcdefghijklmnopqrstuvwxyz123\n")
    with pytest.raises(ParamsError, match="token"):
        load_params(f)


def test_hash_is_stable_and_sensitive():
    a, b = load_params(None), load_params(None)
    assert a.hash() == b.hash() and len(a.hash()) == 16
    assert a.hash() != load_params(None, overrides={"seed": 2}).hash()


def test_data_root_from_params_or_env(monkeypatch, tmp_path):
    monkeypatch.setenv("AZLLM_DATA_ROOT", str(tmp_path))
    assert Paths(load_params(None)).data_root == tmp_path.resolve()
    other = tmp_path / "other"
    assert Paths(load_params(None, overrides={"data": {"root": str(other)}})).data_root == other.resolve()
    monkeypatch.setenv("AZLLM_DATA_ROOT", "")  # set but empty: no data root
    assert Paths(load_params(None)).data_root is None


def test_a_key_given_twice_is_refused_with_its_lines(tmp_path):
    """YAML lets the last of two equal keys win silently; a params file refuses it (a second ``lr`` under
    ``preference`` would otherwise undo the first without a word)."""
    p = tmp_path / "p.yaml"
    p.write_text("preference:\n  lr: 5.0e-5\n  max_steps: 24\n  lr: 2.0e-4\n")
    with pytest.raises(ParamsError, match=r"not valid YAML: key 'lr' is given twice \(first on line 2\)") as e:
        load_params(p)
    assert "line 4" in str(e.value)
    p.write_text("preference:\n  lr: 5.0e-5\nsft:\n  lr: 2.0e-4\n")  # the same key in two mappings is fine
    assert load_params(p).preference.lr == 5.0e-5
