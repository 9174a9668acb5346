"""azllm.sft.generate: held-out conversations answered through an engine (one row per conversation, the prompt
and reference taken from its last assistant turn) and chrF++ against the references, as sacrebleu computes it."""

import pytest
import torch
from sft_helpers import tiny_base  # noqa: F401  (fixture)

from azllm.engine import Decoding, TorchEngine
from azllm.sft.generate import chrf_scores, generate_answers


def _answers(model, tok, convs, *, max_new_tokens, stop_ids):
    return generate_answers(TorchEngine(model, tok, stop_ids=stop_ids), convs, Decoding(max_new_tokens))


def test_chrf_plus_plus_is_sacrebleu_s_with_word_bigrams():
    from sacrebleu.metrics import CHRF

    hyp, ref = ["Bakı Azərbaycanın paytaxtıdır."], ["Bakı Azərbaycanın paytaxtıdır."]
    assert chrf_scores(hyp, ref)["chrf++"] == pytest.approx(100.0)
    hyp, ref = ["Bakı böyük şəhərdir.", "Salam"], ["Bakı Azərbaycanın paytaxtıdır.", "Salam, dostum"]
    got = chrf_scores(hyp, ref)
    assert got["chrf++"] == pytest.approx(CHRF(word_order=2).corpus_score(hyp, [ref]).score)
    assert 0 < got["per_answer"][0] < 100 and len(got["per_answer"]) == 2
    with pytest.raises(ValueError, match="2 answers for 1 references"):
        chrf_scores(hyp, ref[:1])


def test_answers_follow_the_generation_prompt_and_stop_at_the_end_of_turn(tiny_base):
    """A model that always predicts the end-of-turn token right after the prompt answers with nothing and
    ``stopped``; with no stop id reached the answer runs to max_new_tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from azllm.sft.template import add_token_rows, prepare_tokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_base))
    info = prepare_tokenizer(tok)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_base))
    add_token_rows(model, info["added_tokens"])
    conv = {"id": "x", "messages": [{"role": "user", "content": "Salam"}, {"role": "assistant", "content": "Salam!"}]}
    free = _answers(model, tok, [conv], max_new_tokens=5, stop_ids=[info["end_of_turn_id"]])[0]
    with torch.no_grad():
        model.lm_head.bias = torch.nn.Parameter(torch.zeros(len(tok)))
        model.lm_head.bias[info["end_of_turn_id"]] = 1e4
    stopped = _answers(model, tok, [conv], max_new_tokens=5, stop_ids=[info["end_of_turn_id"]])[0]
    assert stopped == {
        "id": "x",
        "prompt": "Salam",
        "reference": "Salam!",
        "answer": "",
        "tokens": 1,
        "stopped": True,
        "words": 0,
        "loop": False,
    }
    assert free["tokens"] == 5 or free["stopped"]
