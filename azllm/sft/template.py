"""The chat template of instruction tuning: azllm's own, a base's own, or a file; its role tokens, its end-of-turn
token, and the check that assistant-only loss can work with it.

**azllm's template** (:data:`AZLLM_TEMPLATE`, Jinja, what :func:`prepare_tokenizer` installs on a tokenizer that
has none): every turn is ``<|role|>content<|end|>`` with the roles ``system``, ``user`` and ``assistant``, nothing
between turns, no BOS (azllm's models are pretrained on documents separated by EOS, with no BOS).
``add_generation_prompt`` appends ``<|assistant|>``. The assistant's content *and its* ``<|end|>`` are inside
``{% generation %}`` ... ``{% endgeneration %}``, so TRL's ``assistant_only_loss`` puts loss on exactly those
tokens and the model learns to stop. ``<|system|>``, ``<|user|>``, ``<|assistant|>`` and ``<|end|>`` are added to the
tokenizer as special tokens (never split, never produced by plain text); their embedding rows are new
(:func:`add_token_rows`: the mean of the existing rows) and train like the rows of a vocabulary change
(:func:`azllm.lora.resolve_new_rows`). No newline follows a role token: the content is a segment of its own
between special tokens, so it tokenizes the same in training and after a generation prompt.

**A base's own template** (Llama-3.x, Qwen, ChatML ...) is kept with ``template="auto"``. Assistant-only loss needs
generation markers: a template without them is swapped for TRL's training version of the same template when TRL
has one (:func:`trl.chat_template_utils.get_training_chat_template`: same text, markers added), or a ChatML
template written turn by turn, such as SmolLM2-Instruct's (:func:`chatml_with_markers`: markers added, kept only if
it renders the same text), else :func:`check_generation_markers` stops with what to do. :data:`CHATML_TEMPLATE` is
ChatML (``<|im_start|>role\\n``
... ``<|im_end|>\\n``, the format of SmolLM2-Instruct and Qwen) with markers, for ``template="chatml"``.

The template that trained is the one saved: :func:`prepare_tokenizer` sets ``tokenizer.chat_template``, and
``save_pretrained`` writes it (``chat_template.jinja``), so ``AutoTokenizer.apply_chat_template`` on the export
gives the training format (tested).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypedDict

import torch

__all__ = [
    "AZLLM_TEMPLATE",
    "CHATML_TEMPLATE",
    "ROLE_TOKENS",
    "END_OF_TURN",
    "SftTemplateError",
    "has_generation_markers",
    "prepare_tokenizer",
    "Template",
    "check_generation_markers",
    "chatml_with_markers",
    "end_of_turn_token",
    "add_token_rows",
    "conversation_lengths",
    "render_prompt",
]

END_OF_TURN = "<|end|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", END_OF_TURN)

AZLLM_TEMPLATE = (
    "{#- azllm chat template v1: <|role|>content<|end|> per turn (system, user, assistant); the assistant's content "
    "and its <|end|> are the generation (the loss of assistant-only training); add_generation_prompt appends "
    "<|assistant|> -#}\n"
    "{%- for message in messages -%}\n"
    "{%- if message['role'] not in ['system', 'user', 'assistant'] -%}"
    "{{ raise_exception('unknown role ' + message['role'] + ': use system, user or assistant') }}{%- endif -%}\n"
    "{%- if message['role'] == 'assistant' -%}"
    "{{ '<|assistant|>' }}{% generation %}{{ message['content'] + '<|end|>' }}{% endgeneration %}"
    "{%- else -%}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{ '<|assistant|>' }}{%- endif -%}\n"
)
"""azllm's chat template (module docstring)."""

CHATML_TEMPLATE = (
    "{%- for message in messages -%}\n"
    "{%- if message['role'] == 'assistant' -%}"
    "{{ '<|im_start|>assistant\\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{ '\\n' }}"
    "{%- else -%}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}\n"
)
"""ChatML with generation markers (``<|im_end|>`` inside them)."""

_CHATML_TURN = "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
"""A ChatML turn as SmolLM2-Instruct's template writes it (real newlines inside the Jinja strings)."""
_CHATML_MARKED = (
    "{% if message['role'] == 'assistant' %}{{'<|im_start|>assistant\n'}}{% generation %}"
    "{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{'\n'}}{% else %}" + _CHATML_TURN + "{% endif %}"
)
_PROBE = [
    [{"role": "user", "content": "Sual"}, {"role": "assistant", "content": "Cavab"}],
    [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "A"},
        {"role": "assistant", "content": "B"},
        {"role": "user", "content": "C"},
        {"role": "assistant", "content": "D"},
    ],
]

_NAMED = {"azllm": (AZLLM_TEMPLATE, ROLE_TOKENS), "chatml": (CHATML_TEMPLATE, ("<|im_start|>", "<|im_end|>"))}


class SftTemplateError(ValueError):
    """A chat template that cannot train as asked."""


def has_generation_markers(template: str | None) -> bool:
    """Whether a chat template marks the assistant's tokens (``{% generation %}``)."""
    return bool(template) and "generation" in template and "endgeneration" in template


class Template(TypedDict):
    """The chat template of training (:func:`prepare_tokenizer`): which one, the ids of the tokens it added (they
    get embedding rows), and the end-of-turn token that stops generation."""

    template: str
    added_tokens: list[int]
    end_of_turn: str
    end_of_turn_id: int


def prepare_tokenizer(
    tokenizer, *, template: str = "auto", assistant_only_loss: bool = True, name: str = "the base"
) -> Template:
    """Give ``tokenizer`` the chat template of training (in place) and return what was done:
    ``{"template": "base" | "base (with generation markers)" | "azllm" | "chatml" | path, "added_tokens": [ids],
    "end_of_turn": token, "end_of_turn_id": id}``. ``template``: ``auto`` (the base's own if it has one, else
    azllm's), ``azllm``, ``chatml`` or a path to a Jinja file. Tokens the template needs and the tokenizer lacks
    are added as special tokens (``added_tokens``: their ids, to get embedding rows, :func:`add_token_rows`)."""
    before = len(tokenizer)
    own = getattr(tokenizer, "chat_template", None)
    if template == "auto" and own:
        used, tokens = "base", ()
    elif template in ("auto", "azllm", "chatml"):
        text, tokens = _NAMED["azllm" if template == "auto" else template]
        tokenizer.chat_template, used = text, ("azllm" if template == "auto" else template)
    else:
        path = Path(os.path.expanduser(template))
        if not path.is_file():
            raise SftTemplateError(f"sft.template {template!r}: not auto, azllm, chatml or an existing Jinja file")
        tokenizer.chat_template, used, tokens = path.read_text(encoding="utf-8"), str(path), ()
    missing = [t for t in tokens if t not in tokenizer.get_vocab()]
    if missing:
        tokenizer.add_tokens(missing, special_tokens=True)
    if assistant_only_loss and not has_generation_markers(tokenizer.chat_template):
        tokenizer.chat_template = check_generation_markers(tokenizer, name=name)
        used = f"{used} (with generation markers)"
    eot = end_of_turn_token(tokenizer)
    return {
        "template": used,
        "added_tokens": list(range(before, len(tokenizer))),
        "end_of_turn": eot,
        "end_of_turn_id": tokenizer.convert_tokens_to_ids(eot),
    }


def check_generation_markers(tokenizer, *, name: str = "the base") -> str:
    """The training version of a template without generation markers (TRL's, same text with markers), or
    :class:`SftTemplateError` saying what to do."""
    from trl.chat_template_utils import get_training_chat_template

    try:
        fixed = get_training_chat_template(tokenizer)
    except Exception as e:  # TRL raises ValueError for a template it does not know
        reason = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    else:
        if fixed and has_generation_markers(fixed):
            return fixed
        reason = "TRL has no training version of it"
    marked = chatml_with_markers(tokenizer)
    if marked is not None:
        return marked
    raise SftTemplateError(
        f"assistant_only_loss needs a chat template with {{% generation %}} markers, and the template of {name} has "
        f"none ({reason}). Set sft.template: azllm (azllm's template, new role tokens) or chatml (ChatML with "
        "markers), give a Jinja file with markers, or set sft.assistant_only_loss: false (loss on every token)."
    )


def chatml_with_markers(tokenizer) -> str | None:
    """A ChatML template written turn by turn as ``'<|im_start|>' + role + '\\n' + content + '<|im_end|>' + '\\n'``
    (SmolLM2-Instruct's, with its default system turn) with the assistant turns marked: the same template otherwise,
    kept only if it renders exactly the same text on probe conversations; else None."""
    template = tokenizer.chat_template or ""
    if _CHATML_TURN not in template:
        return None
    marked = template.replace(_CHATML_TURN, _CHATML_MARKED)
    for msgs in _PROBE:
        for gen in (False, True):
            conv = msgs[:-1] if gen else msgs
            if tokenizer.apply_chat_template(
                conv, chat_template=marked, tokenize=False, add_generation_prompt=gen
            ) != tokenizer.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen):
                return None
    return marked


def end_of_turn_token(tokenizer) -> str:
    """The token that ends an assistant turn in the template (the first special token after an answer), else the
    tokenizer's EOS."""
    answer = "Salam dünya"
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Sual"}, {"role": "assistant", "content": answer}], tokenize=False
    )
    tail = text[text.rindex(answer) + len(answer) :]
    specials = sorted(
        set(tokenizer.all_special_tokens) | {t for t, i in tokenizer.get_added_vocab().items()}, key=len, reverse=True
    )
    for tok in specials:
        if tok and tail.startswith(tok):
            return tok
    if tokenizer.eos_token is None:
        raise SftTemplateError(
            "the chat template ends an assistant turn with no special token and the tokenizer "
            "has no EOS: the model could never learn to stop. Use sft.template: azllm."
        )
    return tokenizer.eos_token


@torch.no_grad()
def add_token_rows(model, new_ids: list[int]) -> list[int]:
    """Resize ``model``'s embeddings for ``new_ids`` (appended token ids) and set each new input and output row to
    the mean of the existing rows (the init of :mod:`azllm.model` for a token without base pieces); returns
    ``new_ids``."""
    if not new_ids:
        return []
    n_old = model.get_input_embeddings().weight.shape[0]
    want = max(new_ids) + 1
    if want <= n_old:
        return list(new_ids)
    model.resize_token_embeddings(want, mean_resizing=False)
    for emb in {
        id(e): e for e in (model.get_input_embeddings(), model.get_output_embeddings()) if e is not None
    }.values():
        w = emb.weight
        w[n_old:] = w[:n_old].float().mean(0, keepdim=True).to(w.dtype)
    return list(new_ids)


def conversation_lengths(tokenizer, convs: list[dict]) -> list[int]:
    """Tokens of each conversation with the chat template."""
    return [len(_ids(tokenizer.apply_chat_template(c["messages"], tokenize=True))) for c in convs]


def _ids(out) -> list[int]:
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def render_prompt(tokenizer, messages: list[dict]) -> list[int]:
    """Token ids of a prompt (every turn before the last assistant turn) with the generation prompt."""
    last = (
        max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        if any(m["role"] == "assistant" for m in messages)
        else len(messages)
    )
    return _ids(tokenizer.apply_chat_template(messages[:last], tokenize=True, add_generation_prompt=True))
