"""Held-out answers with the chat template and chrF++ (sacrebleu)."""

import pytest
import torch
from sft_helpers import tiny_base  # noqa: F401  (fixture)

from azllm.sft.generate import chrf_scores, generate_answers


def _convs(n: int) -> list[dict]:
    """``n`` conversations whose prompts have different lengths."""
    return [
        {
            "id": f"c{i}",
            "messages": [
                {"role": "user", "content": "Salam, " + "necəsən? " * (1 + 3 * i % 7)},
                {"role": "assistant", "content": "Yaxşıyam."},
            ],
        }
        for i in range(n)
    ]


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
    free = generate_answers(model, tok, [conv], max_new_tokens=5, stop_ids=[info["end_of_turn_id"]])[0]
    with torch.no_grad():
        model.lm_head.bias = torch.nn.Parameter(torch.zeros(len(tok)))
        model.lm_head.bias[info["end_of_turn_id"]] = 1e4
    stopped = generate_answers(model, tok, [conv], max_new_tokens=5, stop_ids=[info["end_of_turn_id"]])[0]
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


def test_batched_left_padded_answers_equal_one_prompt_at_a_time(tiny_base):
    """Prompts of different lengths, 3 at a time (left padding, sorted by length): the same greedy tokens, answers
    and stop flags as one prompt at a time, in the order given."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from azllm.sft.template import add_token_rows, prepare_tokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_base))
    info = prepare_tokenizer(tok)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_base))
    add_token_rows(model, info["added_tokens"])
    convs = _convs(7)
    kw = {"max_new_tokens": 6, "stop_ids": [info["end_of_turn_id"]]}
    alone = [generate_answers(model, tok, [c], **kw)[0] for c in convs]
    batched = generate_answers(model, tok, convs, batch_size=3, **kw)
    assert [r["id"] for r in batched] == [c["id"] for c in convs]
    assert batched == alone


def test_a_loop_is_a_word_trigram_said_three_times():
    from azllm.sft.generate import has_loop, loop_share

    assert has_loop("Nizami Gəncəvi haqqında qəbul çox çox çox çox çox")
    assert not has_loop("Nizami Gəncəvi haqqında qəbul çox çox çox çox")  # the trigram "çox çox çox" only twice
    assert has_loop("Maddə 1. Qanun qüvvədədir. maddə 1 qanun qüvvədədir; MADDƏ 1 qanun")  # case and punctuation aside
    assert not has_loop("Bakı Azərbaycanın paytaxtıdır və ən böyük şəhəridir.")
    assert has_loop("a b a b a b a") and not has_loop("a b a b a b")
    assert not has_loop("")
    assert loop_share(["a a a a a", "b", "c d", "e e e e e"]) == 0.5
    assert loop_share([]) is None


def test_the_repetition_penalty_breaks_a_forced_loop_and_batches_as_one_at_a_time(tiny_base):
    """A model biased towards one word token repeats it to max_new_tokens; the penalty on the answer's own tokens
    stops it repeating. With the penalty, 3 prompts at a time (left padding) give the same answers as one at a
    time: a row's padding and prompt never count."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from azllm.sft.template import add_token_rows, prepare_tokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_base))
    info = prepare_tokenizer(tok)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_base))
    add_token_rows(model, info["added_tokens"])
    word = tok("salam", add_special_tokens=False)["input_ids"][0]
    with torch.no_grad():
        model.lm_head.bias = torch.nn.Parameter(torch.zeros(len(tok)))
        model.lm_head.bias[word] = 2.0 + model.lm_head.weight.abs().sum(1).max()  # above any other logit
    convs = _convs(5)
    kw = {"max_new_tokens": 8, "stop_ids": [info["end_of_turn_id"]]}
    looped = generate_answers(model, tok, convs[:1], **kw)[0]
    assert looped["tokens"] == 8 and looped["answer"] == tok.decode([word] * 8).strip()
    with pytest.raises(ValueError, match="positive"):
        generate_answers(model, tok, convs[:1], repetition_penalty=0.0, **kw)
    big = {**kw, "repetition_penalty": 1e6}
    broken = generate_answers(model, tok, convs[:1], **big)[0]
    assert broken["answer"] != looped["answer"]
    alone = [generate_answers(model, tok, [c], **big)[0] for c in convs]
    assert generate_answers(model, tok, convs, batch_size=3, **big) == alone
