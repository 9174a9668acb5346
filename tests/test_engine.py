"""The one generation engine (azllm.engine): batching, stop tokens, repetition control, loop detection, and every
stage answering through it."""

import pytest
import torch
from sft_helpers import tiny_base  # noqa: F401  (fixture)

from azllm.engine import Decoding, TorchEngine
from azllm.sft.generate import generate_answers


def _answers(model, tok, convs, *, max_new_tokens, stop_ids, batch_size=8, repetition_penalty=1.0):
    engine = TorchEngine(model, tok, stop_ids=stop_ids, batch_size=batch_size)
    return generate_answers(engine, convs, Decoding(max_new_tokens, repetition_penalty=repetition_penalty))


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
    alone = [_answers(model, tok, [c], **kw)[0] for c in convs]
    batched = _answers(model, tok, convs, batch_size=3, **kw)
    assert [r["id"] for r in batched] == [c["id"] for c in convs]
    assert batched == alone


def test_a_loop_is_a_word_trigram_said_three_times():
    from azllm.engine import has_loop, loop_share

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
    looped = _answers(model, tok, convs[:1], **kw)[0]
    assert looped["tokens"] == 8 and looped["answer"] == tok.decode([word] * 8).strip()
    with pytest.raises(ValueError, match="positive"):
        Decoding(8, repetition_penalty=0.0)
    big = {**kw, "repetition_penalty": 1e6}
    broken = _answers(model, tok, convs[:1], **big)[0]
    assert broken["answer"] != looped["answer"]
    alone = [_answers(model, tok, [c], **big)[0] for c in convs]
    assert _answers(model, tok, convs, batch_size=3, **big) == alone


def test_only_the_engine_generates():
    """No module but azllm/engine.py calls a model's ``generate`` or llama.cpp's completions."""
    import ast
    from pathlib import Path

    import azllm

    names = {"generate", "create_completion", "create_chat_completion"}
    found = []
    for path in Path(azllm.__file__).parent.rglob("*.py"):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in names:
                found.append(path.name)
    assert set(found) == {"engine.py"}


def test_every_stage_answers_through_the_engine(monkeypatch, tiny_base):
    """The engine replaced by a recording one: SFT's judgement (and the controls, which call it), the preference
    pairs, the deploy check (both runtimes) and the training samples all take its answers."""
    from transformers import AutoTokenizer

    from azllm import engine, recipes
    from azllm.recipes import deploy as rd
    from azllm.recipes import prefer as rp
    from azllm.recipes import sft as rs
    from azllm.sft.template import prepare_tokenizer

    calls = []

    class Recording:
        def __init__(self, kind, kw):
            self.kind, self.kw = kind, kw

        def complete(self, prompts, decoding):
            calls.append((self.kind, len(prompts), decoding))
            return [
                {"text": f"cavab {i}", "tokens": 2, "stopped": i > 0, "words": 2, "loop": False}
                for i in range(len(prompts))
            ]

    monkeypatch.setattr(engine, "torch_engine", lambda model, tok, **kw: Recording("torch", kw))
    monkeypatch.setattr(engine, "llama_cpp_engine", lambda path, **kw: Recording("llama.cpp", kw))
    cfg = recipes.load(None)
    tok = AutoTokenizer.from_pretrained(str(tiny_base))
    template = prepare_tokenizer(tok)
    convs = _convs(3)
    sft_decoding = Decoding(cfg.sft.max_new_tokens, repetition_penalty=cfg.sft.repetition_penalty)

    scored = rs.scored_answers(cfg, None, tok, template, {"held_out": convs})
    assert [r["answer"] for r in scored["rows"]] == ["cavab 0", "cavab 1", "cavab 2"]
    assert scored["stopped_share"] == 2 / 3 and calls.pop() == ("torch", 3, sft_decoding)
    pairs, counts = rp._answered_pairs(None, tok, template, convs, "on_policy", cfg)
    assert [p["rejected"][0]["content"] for p in pairs] == ["cavab 0", "cavab 1", "cavab 2"]
    assert calls.pop() == ("torch", 3, sft_decoding)

    record = {"folder": str(tiny_base), "files": {"Q4_K_M": {"path": "model.gguf", "size_bytes": 1}}}
    rows = rd.answers(cfg, "student", record)
    n = min(cfg.deploy.generate_lines, len(cfg.train.generate.prompts))
    assert [(r["llama_cpp"], r["pytorch"]) for r in rows] == [(f"cavab {i}", f"cavab {i}") for i in range(n)]
    assert sorted(c[:2] for c in calls) == [("llama.cpp", n), ("torch", n)]
    calls.clear()

    from azllm.train import generate

    class Eos:  # azllm's tokenizer, as train.generate takes it
        eos_id = 2

    rows = generate(None, Eos(), ["Bakı", "Gəncə"], max_new_tokens=4, temperature=0.7, top_k=5)
    assert rows[1] == {"prompt": "Gəncə", "greedy": "cavab 1 ⏎", "sampled": "cavab 1 ⏎"}
    assert [c[2].temperature for c in calls] == [0.0, 0.7]
