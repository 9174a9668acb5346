"""The speed of a GGUF file and of its transformers model (azllm.bench.gguf): both sides in fresh processes, the
same prompt ids, the fields the deploy page shows. Tiny shapes: no speed is asserted (the benchmark measures speed,
not the tests)."""

import pytest

from conftest import FIXTURES, TINY_MODEL


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    """A tiny Llama with azllm's SentencePiece BPE tokenizer, as a folder and its F16 GGUF."""
    from azllm.data import iter_documents, resolve_source
    from azllm.deploy import convert
    from azllm.export import copy_tokenizer_files
    from azllm.model import build_model, model_config
    from azllm.tokenizer_train import train_tokenizer

    tmp = tmp_path_factory.mktemp("bench-gguf")
    docs = list(iter_documents(resolve_source({"path": "data/az/train/*.txt", "max_bytes_per_file": 8000}, FIXTURES)))
    tok = train_tokenizer(docs, tmp / "tok", vocab_size=400, model_type="bpe", num_threads=1)
    model = build_model(model_config("tiny", 400, **TINY_MODEL), seed=0)
    model.save_pretrained(tmp / "model", safe_serialization=True)
    copy_tokenizer_files(tok, tmp / "model")
    return tmp / "model", convert(tmp / "model", tmp / "m-F16.gguf")["path"]


@pytest.mark.slow  # three fresh processes (~15 s)
def test_speed_of_both_sides_in_fresh_processes(tiny_gguf):
    from azllm.bench.gguf import hf_speed, speed

    folder, f16 = tiny_gguf
    ids = list(range(100, 116))
    fast = speed(f16, prompt_ids=ids, gen_tokens=4, repeats=1)
    slow = hf_speed(folder, prompt_ids=ids, gen_tokens=4, repeats=1)
    for s in (fast, slow):
        assert s["prompt_tokens"] == 16 and s["prefill_tokens_per_s"] > 0 and s["gen_tokens_per_s"] > 0
        assert s["peak_rss_mb"] > 20 and s["threads"] == 2 and s["gen_tokens"] == 4
    assert speed(f16, prompt_tokens=8, gen_tokens=2, repeats=1)["prompt_tokens"] == 8  # ids drawn from the vocabulary
