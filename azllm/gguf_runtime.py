"""llama.cpp's Python binding (llama-cpp-python, :data:`LLAMA_CPP`), as every GGUF reader in azllm opens it:
:func:`require_llama_cpp` (the module, or how to install it), :func:`llama_log` (its log into a list, never to
stderr), :func:`open_llama` (a quiet CPU ``Llama``, extra buffer types off unless :data:`EXTRA_BUFFERS_ENV`) and
:func:`llama_ids` (its token ids of lines). :class:`DeployError` is the refusal every GGUF step raises.
Used by :mod:`azllm.deploy`, :mod:`azllm.gguf_quality`, :mod:`azllm.engine` and :mod:`azllm.bench.gguf`.

>>> llama_ids("artifacts/deploy/model-F16.gguf", ["Salam"])  # doctest: +SKIP
[[...]]
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["LLAMA_CPP", "EXTRA_BUFFERS_ENV", "DeployError", "require_llama_cpp", "llama_log", "open_llama", "llama_ids"]

LLAMA_CPP = "llama-cpp-python==0.3.36"  # the pin
EXTRA_BUFFERS_ENV = "AZLLM_LLAMA_EXTRA_BUFFERS"
"""1: let llama.cpp repack weights into its extra buffer types (AMX, CPU_REPACK). Off: where the CPU lists AMX but its
tile instructions fault (this sandbox), every quantized matmul kills the process (SIGSEGV, ``ldtilecfg``)."""


class DeployError(ValueError):
    """A model folder, file or option that the deployment refuses, saying why and what to do."""


def require_llama_cpp():
    """The ``llama_cpp`` module, or an ImportError saying how to install it.

    >>> require_llama_cpp().__version__  # doctest: +SKIP
    '0.3.36'
    """
    try:
        import llama_cpp
    except ImportError as e:
        raise ImportError(
            f"llama.cpp's Python binding is missing ({e}): `pip install {LLAMA_CPP}` (it builds llama.cpp from "
            "source with cmake and a C++ compiler, a few minutes)"
        ) from e
    return llama_cpp


_LOG: list[list[bytes]] = []  # the lists of the open llama_log blocks, innermost last
_LOG_CALLBACK: list = []  # the one callback, made once and never freed: a model may log with it after a block ends


@contextlib.contextmanager
def llama_log():
    """llama.cpp's log into a list of bytes (yielded), not stderr; llama_cpp's own callback back after the block."""
    import ctypes

    api = require_llama_cpp()
    from llama_cpp import _logger

    if not _LOG_CALLBACK:
        _LOG_CALLBACK.append(api.llama_log_callback(lambda level, text, data: _LOG and _LOG[-1].append(text)))
    _LOG.append([])
    api.llama_log_set(_LOG_CALLBACK[0], ctypes.c_void_p(0))
    try:
        yield _LOG[-1]
    finally:
        _LOG.pop()
        _logger.set_verbose(False)
        if not _LOG:
            api.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))


def open_llama(gguf_file, **kw):
    """``llama_cpp.Llama`` of ``gguf_file``, quiet, on the CPU, without extra buffer types unless asked."""
    import llama_cpp.llama_cpp as api
    from llama_cpp import Llama

    defaults, extra = api.llama_model_default_params, os.environ.get(EXTRA_BUFFERS_ENV) == "1"

    def params():
        p = defaults()
        p.use_extra_bufts = extra
        return p

    api.llama_model_default_params = params
    try:
        with llama_log():
            return Llama(model_path=str(gguf_file), n_gpu_layers=0, verbose=False, **kw)
    finally:
        api.llama_model_default_params = defaults


def llama_ids(gguf_file, lines: list[str], add_bos=False, special=True) -> list[list[int]]:
    """llama.cpp's token ids of each line of text, from the vocabulary of ``gguf_file`` alone (``special``: special
    tokens written in the text are matched, as Hugging Face's ``encode`` does).

    >>> llama_ids("model-F16.gguf", ["Salam", "<|im_end|>"])  # doctest: +SKIP
    [[...], [2]]
    """
    llm = open_llama(gguf_file, vocab_only=True, n_ctx=512)
    with llama_log():
        return [list(llm.tokenize(t.encode("utf-8"), add_bos=add_bos, special=special)) for t in lines]
