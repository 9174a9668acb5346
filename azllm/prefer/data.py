"""Preference data: a user's pairs read and checked, and pairs built for a language that has none.

**Formats** (TRL's, :func:`to_pair`): a pair is ``{"prompt", "chosen", "rejected"}``, each a string (standard) or
a list of ``{"role", "content"}`` messages (conversational: the prompt's turns, then one assistant turn each for
chosen and rejected); unpaired data for KTO is ``{"prompt", "completion", "label"}`` (``label``: true for a good
completion). Every record becomes the conversational form, ``id`` and ``source`` kept. A record with a missing key,
an empty turn, or the same chosen and rejected text stops the reading with its file, line and what to fix
(:class:`PreferenceDataError`); :func:`check_lengths` refuses a prompt that fills ``max_length`` (TRL would drop it
silently).

**Built pairs** (:func:`build_pairs`, :func:`native_over_mt`):

- *on-policy*: the chosen answer is a reference answer, the rejected one the SFT model's own answer to the same
  prompt (as SPIN and SeaLLM do); a model answer equal to the reference (after whitespace) or empty gives no pair;
- *native over machine-translated*: where a prompt has both a native answer and a machine-translated one, the
  native one is chosen.

:func:`decontaminate_pairs` drops a pair whose text (prompt, chosen and rejected) shares a word n-gram with a
held-out conversation or an evaluation text (:func:`azllm.sft.decontaminate.decontaminate`); :func:`source_shares`
gives each source's share of what is left.

>>> p = to_pair({"prompt": "Salam?", "chosen": "Salam!", "rejected": "Bilmirəm."}, "x.jsonl:1")
>>> p["prompt"], p["chosen"][0]["content"]
([{'role': 'user', 'content': 'Salam?'}], 'Salam!')
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ..data import DataError

__all__ = [
    "PreferenceDataError",
    "to_pair",
    "read_pairs",
    "check_lengths",
    "build_pairs",
    "native_over_mt",
    "decontaminate_pairs",
    "source_shares",
]


class PreferenceDataError(DataError):
    """Preference data that cannot be trained on as it is: the message names the record and what to fix."""


def _turns(value, where: str, key: str, role: str) -> list[dict]:
    if isinstance(value, str):
        turns = [{"role": role, "content": value}]
    elif isinstance(value, list) and all(isinstance(m, dict) for m in value):
        turns = value
    else:
        raise PreferenceDataError(f"{where}: {key!r} must be a string or a list of {{role, content}} messages")
    if not turns:
        raise PreferenceDataError(f"{where}: {key!r} has no turn")
    for m in turns:
        if "role" not in m or "content" not in m:
            raise PreferenceDataError(f"{where}: a message of {key!r} lacks 'role' or 'content': {m}")
        if not isinstance(m["content"], str) or not m["content"].strip():
            raise PreferenceDataError(f"{where}: {key!r} has an empty {m['role']} turn")
    return [{"role": m["role"], "content": m["content"]} for m in turns]


def to_pair(record: dict, where: str, source: str = "user") -> dict:
    """One record of TRL's formats (module docstring) in the conversational form, checked."""
    if not isinstance(record, dict):
        raise PreferenceDataError(f"{where}: a record must be a JSON object, got {type(record).__name__}")
    paired = {"prompt", "chosen", "rejected"}
    if "label" in record or "completion" in record:
        missing = sorted({"prompt", "completion", "label"} - set(record))
        if missing:
            raise PreferenceDataError(f"{where}: no {missing} (unpaired data for KTO: prompt, completion, label)")
        if not isinstance(record["label"], bool):
            raise PreferenceDataError(f"{where}: 'label' must be true or false, got {record['label']!r}")
        return {
            "id": str(record.get("id", where)),
            "source": record.get("source", source),
            "prompt": _turns(record["prompt"], where, "prompt", "user"),
            "completion": _turns(record["completion"], where, "completion", "assistant"),
            "label": record["label"],
        }
    missing = sorted(paired - set(record))
    if missing:
        raise PreferenceDataError(
            f"{where}: no {missing} (a preference pair has prompt, chosen and rejected; unpaired data for KTO: "
            "prompt, completion, label)"
        )
    pair = {
        "id": str(record.get("id", where)),
        "source": record.get("source", source),
        "prompt": _turns(record["prompt"], where, "prompt", "user"),
        "chosen": _turns(record["chosen"], where, "chosen", "assistant"),
        "rejected": _turns(record["rejected"], where, "rejected", "assistant"),
    }
    if _text(pair["chosen"]) == _text(pair["rejected"]):
        raise PreferenceDataError(f"{where}: chosen and rejected are the same text; drop the record or fix it")
    return pair


def _text(turns: list[dict]) -> str:
    return " ".join(" ".join(m["content"].split()) for m in turns)


def read_pairs(path: str | Path, source: str | None = None) -> list[dict]:
    """The records of a jsonl file as checked pairs (or unpaired KTO records), in file order.

    >>> read_pairs("data/az/preference/pairs.jsonl")[0]["source"]  # doctest: +SKIP
    'pairs'
    """
    path = Path(path)
    if not path.is_file():
        raise PreferenceDataError(f"{path}: no such preference file")
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise PreferenceDataError(f"{path}:{i}: not JSON ({e.msg})") from None
            out.append(to_pair(record, f"{path.name}:{i}", source or path.stem))
    if not out:
        raise PreferenceDataError(f"{path}: no records")
    return out


def check_lengths(pairs: list[dict], tokenizer, max_length: int) -> None:
    """Refuse a pair whose prompt, rendered with the chat template, fills ``max_length`` tokens: nothing of its
    answers would be trained on (TRL drops such a pair without a word)."""
    for p in pairs:
        ids = tokenizer.apply_chat_template(p["prompt"], add_generation_prompt=True, tokenize=True, return_dict=False)
        n = len(ids)
        if n >= max_length:
            raise PreferenceDataError(
                f"{p['id']}: the prompt is {n} tokens, not shorter than max_length {max_length}; raise "
                "preference.max_length or shorten the prompt"
            )


def build_pairs(prompts: list[list[dict]], references: list[str], answers: list[str], ids: list[str], source: str):
    """On-policy pairs: ``references[i]`` chosen over the model's ``answers[i]`` to ``prompts[i]``. Returns
    ``(pairs, counts)`` with ``counts``: ``built``, ``same`` (the answer equals the reference, spacing aside: no
    pair) and ``empty`` (how many of the built pairs reject an empty answer). An empty answer is a wrong answer
    the model gives, so the reference is preferred over it: dropping it would leave a model that stops at once
    with nothing to learn from.

    >>> pairs, c = build_pairs([[{"role": "user", "content": "Bakı?"}]] * 3, ["Paytaxt.", "Şəhər.", "Bəli."],
    ...                        ["Bilmirəm.", "Şəhər.", " "], ["a", "b", "c"], "native")
    >>> [p["rejected"][0]["content"] for p in pairs], c
    (['Bilmirəm.', ''], {'built': 2, 'same': 1, 'empty': 1})
    """
    if not len(prompts) == len(references) == len(answers) == len(ids):
        raise ValueError("build_pairs needs as many prompts, references, answers and ids")
    pairs, counts = [], {"built": 0, "same": 0, "empty": 0}
    for prompt, ref, ans, i in zip(prompts, references, answers, ids):
        ans = ans if ans.strip() else ""
        counts["empty"] += not ans
        if " ".join(ans.split()) == " ".join(ref.split()):
            counts["same"] += 1
            continue
        pairs.append(
            {
                "id": f"{source}/{i}",
                "source": source,
                "prompt": prompt,
                "chosen": [{"role": "assistant", "content": ref}],
                "rejected": [{"role": "assistant", "content": ans}],
            }
        )
        counts["built"] += 1
    return pairs, counts


def _prompt_key(messages: list[dict]) -> str:
    return " ".join(" ".join(m["content"].lower().split()) for m in messages if m["role"] != "assistant")


def native_over_mt(native: list[dict], translated: list[dict]) -> list[dict]:
    """Pairs where a prompt (its non-assistant turns, case and spacing aside) has a native conversation and a
    machine-translated one: the native last answer chosen over the translated one. Conversations are
    ``{"id", "messages"}`` ending with an assistant turn."""
    mt = {_prompt_key(c["messages"][:-1]): c for c in translated}
    pairs = []
    for c in native:
        other = mt.get(_prompt_key(c["messages"][:-1]))
        if other is None or _text(c["messages"][-1:]) == _text(other["messages"][-1:]):
            continue
        pairs.append(
            {
                "id": f"native_over_mt/{c['id']}",
                "source": "native_over_mt",
                "prompt": c["messages"][:-1],
                "chosen": c["messages"][-1:],
                "rejected": other["messages"][-1:],
            }
        )
    return pairs


def decontaminate_pairs(
    pairs: list[dict], *, held_out: list[dict], eval_texts: dict[str, list[str]], n: int = 8, min_words: int = 6
) -> tuple[list[dict], dict]:
    """``(kept, counts)``: the pairs none of whose turns overlaps a held-out conversation or an evaluation text
    (:func:`azllm.sft.decontaminate.decontaminate`, the same rule as SFT's training data)."""
    from ..sft.decontaminate import decontaminate

    convs = [{"id": p["id"], "messages": p["prompt"] + p.get("chosen", []) + _other(p)} for p in pairs]
    kept, counts = decontaminate(convs, held_out=held_out, eval_texts=eval_texts, n=n, min_words=min_words)
    keep = {c["id"] for c in kept}
    return [p for p in pairs if p["id"] in keep], counts


def _other(p: dict) -> list[dict]:
    return p.get("rejected") or p.get("completion") or []


def source_shares(pairs: list[dict]) -> dict[str, float]:
    """Each source's share of ``pairs``.

    >>> source_shares([{"source": "a"}, {"source": "a"}, {"source": "b"}, {"source": "a"}])
    {'a': 0.75, 'b': 0.25}
    """
    counts = Counter(p["source"] for p in pairs)
    return {k: v / len(pairs) for k, v in sorted(counts.items())} if pairs else {}
