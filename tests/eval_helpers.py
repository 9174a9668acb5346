"""Shared pieces of the evaluation tests (tests/test_evaluation_*.py, tests/test_recipes_evaluate.py): a real
SentencePiece tokenizer trained on the fixture corpus, a tiny random Llama saved as a folder, the fixture eval data,
and GPT-2's byte-level BPE with a tiny random Llama of its vocabulary (in memory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES, TINY_MODEL

REPO = Path(__file__).resolve().parent.parent
EVAL = FIXTURES


def task(name: str, **kw) -> list[dict]:
    """A shipped task's config(s) on the fixture data (paths of params/tiny.yaml), ``kw`` laid over."""
    from azllm.config import load_params
    from azllm.evaluation.tasks import local_task

    t = load_params(REPO / "params/tiny.yaml").evaluate.local[name]
    at = lambda p: str(EVAL / p) if p else p  # noqa: E731
    args = {
        "path": at(t.path),
        "fewshot_path": at(t.fewshot_path),
        "num_fewshot": t.num_fewshot,
        "subset": t.subset,
        "first": t.first,
        "max_gen_toks": t.max_gen_toks,
    }
    return local_task(name, **{**args, **kw})


@pytest.fixture(scope="session")
def eval_tokenizer_dir(tmp_path_factory) -> Path:
    """A 700-piece BPE SentencePiece tokenizer (a Hugging Face folder) of the fixture corpus + English."""
    from azllm.data import iter_documents, resolve_source
    from azllm.tokenizer_train import train_tokenizer

    docs = list(iter_documents(resolve_source({"path": "data/az/train/*.txt", "max_bytes_per_file": 8000}, FIXTURES)))
    docs += list(iter_documents(resolve_source({"path": "data/en/train.txt", "max_bytes": 40000}, FIXTURES)))
    return train_tokenizer(docs, tmp_path_factory.mktemp("evtok") / "tok", vocab_size=700, model_type="bpe")


@pytest.fixture(scope="session")
def hf_tok(eval_tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(eval_tokenizer_dir), local_files_only=True)


@pytest.fixture(scope="session")
def tiny_folder(eval_tokenizer_dir, hf_tok, tmp_path_factory) -> Path:
    """A tiny random Llama (seed 0) with the tokenizer, saved as a standalone folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from azllm.export import copy_tokenizer_files

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(hf_tok),
            eos_token_id=hf_tok.eos_token_id,
            bos_token_id=hf_tok.bos_token_id,
            pad_token_id=hf_tok.pad_token_id,
            **TINY_MODEL,
        )
    )
    out = tmp_path_factory.mktemp("tiny") / "model"
    model.save_pretrained(str(out))
    copy_tokenizer_files(eval_tokenizer_dir, out)
    return out


@pytest.fixture(scope="session")
def tiny_model(tiny_folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_folder)).eval()


@pytest.fixture(scope="module")
def gpt2_tok():
    """GPT-2's byte-level BPE (the fixture's vocab.json / merges.txt) as a Hugging Face tokenizer."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    d = FIXTURES / "tokenizers/gpt2-2k"
    t = Tokenizer(BPE.from_file(str(d / "vocab.json"), str(d / "merges.txt")))
    t.pre_tokenizer, t.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=t, eos_token="<|endoftext|>")


@pytest.fixture(scope="module")
def gpt2_model(gpt2_tok):
    """A tiny random Llama (TINY_MODEL, seed 0) of :func:`gpt2_tok`'s vocabulary."""
    from azllm.model import build_model, model_config

    return build_model(model_config(dict(TINY_MODEL), vocab_size=len(gpt2_tok)), seed=0)
