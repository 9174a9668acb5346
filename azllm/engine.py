"""The one generation engine: every stage's answers (SFT judgement, the controls, preference pairs and their
judgement, the deploy checks, the training samples) come from :meth:`Engine.complete`.

A prompt is plain text to continue (``str``) or a conversation (a list of ``{"role", "content"}`` messages, cut
before its last assistant turn and rendered with the chat template and its generation prompt). Two backends share
the interface:

- :class:`TorchEngine`: a transformers model. Prompts go ``batch_size`` at a time, left-padded (the attention mask
  and position ids skip the padding) and sorted by length, so that a batch holds prompts of about one length:
  the same greedy tokens as one prompt at a time (tested), several times faster. Stops at any of ``stop_ids``.
- :class:`LlamaCppEngine`: a GGUF file through llama-cpp-python (greedy or sampled, its own chat template).

**Decoding** (:class:`Decoding`): greedy at ``temperature`` 0, else sampled with ``top_k`` and ``seed`` (each batch
seeded, so one prompt at a time with ``batch_size`` 1 is reproducible prompt by prompt). **Repetition control**:
with ``repetition_penalty`` above 1, transformers' ``RepetitionPenaltyLogitsProcessor`` (the CTRL penalty) divides
the positive logits (multiplies the negative ones) of every token the answer already holds. Only the answer's own
tokens count (``prompt_ignore_length`` is the padded prompt's width): the prompt's words and its chat markers,
the end-of-turn token among them, are never penalized, and a row's padding never touches another row, so a batch
gives the same answers as one prompt at a time (tested). llama.cpp's ``repeat_penalty`` is the same formula over
its last 64 tokens, prompt included.

**Loops** (:func:`has_loop`): an answer is a loop when one word 3-gram occurs 3 times or more in it ("çox çox çox
çox çox", or a sentence said three times).

Stages get their engine from :func:`torch_engine` and :func:`llama_cpp_engine`, the one place that builds one
(a test replaces them and sees every stage's answers go through it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, TypedDict

import torch

__all__ = [
    "Decoding",
    "Completion",
    "Engine",
    "TorchEngine",
    "LlamaCppEngine",
    "torch_engine",
    "llama_cpp_engine",
    "has_loop",
    "loop_share",
    "count_words",
    "last_user_turns",
]

_WORD = re.compile(r"\w+")

Prompt = str | list[dict]


@dataclass(frozen=True)
class Decoding:
    """How every answer is decoded: greedy (``temperature`` 0) or sampled (``top_k`` 0: no cut), with the
    module's repetition control (``repetition_penalty`` 1.0: none)."""

    max_new_tokens: int = 96
    repetition_penalty: float = 1.0
    temperature: float = 0.0
    top_k: int = 0
    seed: int = 0

    def __post_init__(self):
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be positive (1.0: none), not {self.repetition_penalty}")
        if self.temperature < 0 or self.max_new_tokens < 1:
            raise ValueError(f"temperature must be >= 0 and max_new_tokens >= 1: {self}")


class Completion(TypedDict):
    """One answer: its text (the stop token left out), how many tokens were generated (the stop token counted),
    whether it ended on a stop token rather than at ``max_new_tokens``, its words and its loop flag."""

    text: str
    tokens: int
    stopped: bool
    words: int
    loop: bool


class Engine(Protocol):
    def complete(self, prompts: list[Prompt], decoding: Decoding = Decoding()) -> list[Completion]: ...


def count_words(text: str) -> int:
    """Words of an answer (``\\w+`` runs).

    >>> count_words("Bakı, Xəzərin sahilində.")
    3
    """
    return len(_WORD.findall(text))


def has_loop(text: str, *, n: int = 3, times: int = 3) -> bool:
    """Whether one word ``n``-gram (lowercased ``\\w+`` words) occurs ``times`` times or more in ``text``.

    >>> has_loop("Bakı gözəl şəhərdir. Bakı gözəl şəhərdir. Bakı gözəl şəhərdir.")
    True
    >>> has_loop("çox çox çox çox"), has_loop("çox çox çox çox çox")
    (False, True)
    """
    words = _WORD.findall(text.lower())
    seen: dict[tuple, int] = {}
    for i in range(len(words) - n + 1):
        g = tuple(words[i : i + n])
        seen[g] = seen.get(g, 0) + 1
        if seen[g] >= times:
            return True
    return False


def loop_share(texts: list[str]) -> float | None:
    """The share of ``texts`` that loop (:func:`has_loop`); None for none.

    >>> loop_share(["a b c a b c a b c", "salam"])
    0.5
    """
    return sum(map(has_loop, texts)) / len(texts) if texts else None


def _completion(text: str, tokens: int, stopped: bool) -> Completion:
    text = text.strip()
    return {"text": text, "tokens": tokens, "stopped": stopped, "words": count_words(text), "loop": has_loop(text)}


def last_user_turns(messages: list[dict]) -> list[dict]:
    """A conversation up to (not including) its last assistant turn: what the model answers."""
    ends = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    return messages[: ends[-1]] if ends else list(messages)


class TorchEngine:
    """A transformers model and its tokenizer (a Hugging Face tokenizer, or :class:`azllm.tokenizer.Tok`, whose
    plain prompts follow an EOS as documents do in the token files). ``stop_ids``: the ids that end an answer
    (default: the model's generation config's EOS ids, else the tokenizer's EOS)."""

    def __init__(self, model, tokenizer, *, stop_ids=None, batch_size: int = 8):
        from .lora import check_not_repacked

        check_not_repacked(model)
        self.model, self.tokenizer, self.batch_size = model, tokenizer, max(1, int(batch_size))
        self.hf = hasattr(tokenizer, "apply_chat_template")
        eos = tokenizer.eos_token_id if self.hf else tokenizer.eos_id
        if stop_ids is None:
            gen = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
            stop_ids = (gen if isinstance(gen, list) else [gen]) if gen is not None else [eos]
        self.stop = list(dict.fromkeys(i for i in stop_ids if i is not None))
        if not self.stop:
            raise ValueError("TorchEngine needs a stop id (the tokenizer has no EOS)")
        pad = tokenizer.pad_token_id if self.hf else tokenizer.pad_id
        self.pad = pad if pad is not None else self.stop[0]

    def encode(self, prompt: Prompt) -> list[int]:
        """The prompt's ids: a conversation through the chat template with the generation prompt; plain text as
        it is (after an EOS for an azllm tokenizer)."""
        if not isinstance(prompt, str):
            from .sft.template import render_prompt

            return render_prompt(self.tokenizer, last_user_turns(prompt))
        if self.hf:
            return list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        return [self.tokenizer.eos_id, *self.tokenizer.encode(prompt)]

    def decode(self, ids: list[int]) -> str:
        if self.hf:
            return self.tokenizer.decode(ids, skip_special_tokens=True)
        return self.tokenizer.decode(ids)

    @torch.no_grad()
    def complete(self, prompts: list[Prompt], decoding: Decoding = Decoding()) -> list[Completion]:
        from transformers import LogitsProcessorList, RepetitionPenaltyLogitsProcessor

        model, d = self.model, decoding
        was = model.training
        model.eval()
        device = next(model.parameters()).device
        encoded = [self.encode(p) for p in prompts]
        order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))
        sample = {"do_sample": True, "temperature": d.temperature, "top_k": d.top_k or None}
        out: dict[int, Completion] = {}
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            width = max(len(encoded[i]) for i in chunk)
            ids = torch.full((len(chunk), width), self.pad, dtype=torch.long, device=device)
            mask = torch.zeros_like(ids)
            for row, i in enumerate(chunk):
                ids[row, width - len(encoded[i]) :] = torch.tensor(encoded[i], device=device)
                mask[row, width - len(encoded[i]) :] = 1
            control = (
                [RepetitionPenaltyLogitsProcessor(float(d.repetition_penalty), prompt_ignore_length=width)]
                if d.repetition_penalty != 1.0
                else []
            )
            torch.manual_seed(d.seed)
            gen = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=d.max_new_tokens,
                eos_token_id=self.stop,
                pad_token_id=self.pad,
                logits_processor=LogitsProcessorList(control),
                **(sample if d.temperature > 0 else {"do_sample": False}),
            )
            for row, i in enumerate(chunk):
                new = gen[row, width:].tolist()
                end = next((k for k, t in enumerate(new) if t in self.stop), None)  # a finished row is padded after
                stopped = end is not None
                new = new[: end + 1] if stopped else new
                out[i] = _completion(self.decode(new[:-1] if stopped else new), len(new), stopped)
        model.train(was)
        return [out[i] for i in range(len(prompts))]


class LlamaCppEngine:
    """A GGUF file through llama-cpp-python on the CPU (:func:`azllm.gguf_runtime.require_llama_cpp`). A conversation
    goes through the GGUF's own chat template (a :class:`azllm.gguf_runtime.DeployError` if the file has none)."""

    def __init__(self, gguf_file, *, threads: int = 2, n_ctx: int = 2048):
        from .gguf_runtime import open_llama, require_llama_cpp

        require_llama_cpp()
        self.path = str(gguf_file)
        self.llm = open_llama(gguf_file, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads)

    def complete(self, prompts: list[Prompt], decoding: Decoding = Decoding()) -> list[Completion]:
        from .gguf_runtime import DeployError, llama_log

        d = decoding
        kw = {
            "max_tokens": d.max_new_tokens,
            "temperature": d.temperature,
            "top_k": d.top_k,
            "repeat_penalty": d.repetition_penalty,
            "seed": d.seed,
        }
        if any(not isinstance(p, str) for p in prompts) and not self.llm.metadata.get("tokenizer.chat_template"):
            raise DeployError(f"{self.path} has no chat template (tokenizer.chat_template); give plain text")
        out = []
        for p in prompts:
            with llama_log():
                if isinstance(p, str):
                    r = self.llm.create_completion(p, **kw)
                    text = r["choices"][0]["text"]
                else:
                    r = self.llm.create_chat_completion(messages=last_user_turns(p), **kw)
                    text = r["choices"][0]["message"]["content"] or ""
            stopped = r["choices"][0].get("finish_reason") == "stop"
            out.append(_completion(text, int(r["usage"]["completion_tokens"]), stopped))
        return out


def torch_engine(model, tokenizer, **kw) -> Engine:
    """The engine of a transformers model (:class:`TorchEngine`): what every stage calls."""
    return TorchEngine(model, tokenizer, **kw)


def llama_cpp_engine(gguf_file, **kw) -> Engine:
    """The engine of a GGUF file (:class:`LlamaCppEngine`): what every stage calls."""
    return LlamaCppEngine(gguf_file, **kw)
