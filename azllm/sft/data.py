"""Instruction data as conversations: three record formats, local files or a hub dataset, one output shape.

A source is located like a corpus source (:func:`azllm.data.resolve_source`: a jsonl/parquet glob under the data
root, else a hub dataset); :func:`iter_records` yields its whole records. :func:`to_conversation` turns one record
into a conversation ``{"id", "source", "messages": [{"role", "content"}, ...], "placeholder_input"}``:

- ``messages``: a list of ``{role, content}`` turns (multi-turn, an optional first ``system`` turn);
- ``prompt_completion``: ``prompt`` and ``completion``, each a string (a user turn, an assistant turn) or a list of
  turns (TRL's conversational prompt/completion);
- ``instruction``: Alpaca's ``{instruction, input, output}`` or ``{instruction, response}``; the user turn is the
  instruction, followed by the input after a blank line unless the input is empty or one of ``placeholders``
  (``"Yox"``: the translation artefact of "no input", see :func:`is_placeholder`).

``format="auto"`` picks the first of these whose fields the record has. ``fields`` maps canonical names to the data's
own; a field that is named (or needed) but missing raises :class:`SftDataError` listing the fields found.

:func:`check_conversation` names what is structurally wrong (unknown role, no assistant turn, a conversation that
ends on a user turn, a system turn that is not first); the recipe stops on it or drops and counts it
(``sft.on_bad_record``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

from ..data import DataError, Resolved, read_lines
from ..text import normalize

__all__ = [
    "SftData",
    "SftDataError",
    "ROLES",
    "FORMATS",
    "iter_records",
    "detect_format",
    "to_conversation",
    "check_conversation",
    "is_placeholder",
    "read_conversations",
]

ROLES = ("system", "user", "assistant")
FORMATS = ("messages", "prompt_completion", "instruction")
_OUTPUT_NAMES = ("output", "response")


class SftData(TypedDict):
    """The conversations of a run (:func:`azllm.recipes.conversations.sft_data`): training, held-out (selection)
    and verdict conversations (``{"id", "source", "messages"}``; ``verdict`` is empty without ``sft.verdict_size``
    or ``sft.verdict_sources``), what each step kept (``counts``), notes for the page, and the key the runs and
    answers are cached by."""

    train: list[dict]
    held_out: list[dict]
    verdict: list[dict]
    counts: dict
    notes: list[str]
    key: str


class SftDataError(DataError):
    """A bad instruction record or source: the message names the record and what to do."""


def iter_records(r: Resolved) -> Iterator[tuple[str, dict]]:
    """``(where, record)`` for every record of a resolved source: ``where`` is ``file:line`` (jsonl),
    ``file#row`` (parquet) or ``hub-id[split]#row``. ``max_lines`` caps the records."""
    n = 0
    for where, rec in _iter_files(r.files) if r.kind == "files" else _iter_hub(r):
        if not isinstance(rec, dict):
            raise SftDataError(f"{where}: a record must be a JSON object, got {type(rec).__name__}")
        yield where, rec
        n += 1
        if r.max_lines is not None and n >= r.max_lines:
            return
    if n == 0:
        raise SftDataError(f"no instruction record in {r.describe()}")


def _iter_files(files: list[Path]) -> Iterator[tuple[str, dict]]:
    for path in files:
        if path.suffix in (".jsonl", ".json"):
            for lineno, line in enumerate(read_lines(path), 1):
                if line.strip():
                    try:
                        yield f"{path}:{lineno}", json.loads(line)
                    except json.JSONDecodeError as e:
                        raise SftDataError(f"{path}:{lineno}: not valid JSON: {e}") from None
        elif path.suffix == ".parquet":
            import pyarrow.parquet as pq

            try:
                table = pq.read_table(path)
            except Exception as e:  # pyarrow raises several types for a damaged file
                raise SftDataError(f"{path}: not a readable parquet file ({type(e).__name__}: {e})") from None
            for i, rec in enumerate(table.to_pylist()):
                yield f"{path}#{i}", rec
        else:
            raise SftDataError(
                f"{path}: unsupported file type {path.suffix!r} for instruction data (use .jsonl or .parquet)"
            )


def _iter_hub(r: Resolved) -> Iterator[tuple[str, dict]]:
    try:
        from datasets import load_dataset

        ds = load_dataset(r.hub, r.config, split=r.split, streaming=True)
        it = iter(ds)
        first = next(it, None)
    except Exception as e:  # offline, unknown id, gated: datasets raises many types
        raise SftDataError(
            f"hub dataset {r.hub!r} (config={r.config}, split={r.split}) could not be opened: {type(e).__name__}: "
            f"{e}. Without network access, point the source's path at local jsonl/parquet files (or at a folder "
            "saved with datasets), or set HF_TOKEN for a gated set."
        ) from None
    if first is None:
        return
    yield f"{r.hub}[{r.split}]#0", first
    for i, rec in enumerate(it, 1):
        yield f"{r.hub}[{r.split}]#{i}", rec


def is_placeholder(text: str | None, placeholders: list[str] | tuple[str, ...]) -> bool:
    """Whether an input means "no input": empty, or one of ``placeholders`` after normalization, ignoring case and
    end punctuation.

    >>> is_placeholder("Yox.", ["Yox"]), is_placeholder(" yox ", ["Yox"]), is_placeholder("Yoxlayın", ["Yox"])
    (True, True, False)
    """
    t = _key(text or "")
    return not t or t in {_key(p) for p in placeholders}


def _key(text: str) -> str:
    return normalize(text).strip().strip(".!?;:,").strip().casefold()


def detect_format(record: dict, fields: dict[str, str] | None = None) -> str:
    """The format of a record (module docstring), or :class:`SftDataError` listing the fields found."""
    f = _names(fields)
    if f["messages"] in record:
        return "messages"
    if f["prompt"] in record and f["completion"] in record:
        return "prompt_completion"
    if f["instruction"] in record and _output_name(record, f) is not None:
        return "instruction"
    raise SftDataError(
        f"record fields {sorted(record)} match no instruction format: expected {f['messages']!r} (messages), "
        f"{f['prompt']!r} + {f['completion']!r} (prompt/completion) or {f['instruction']!r} + one of "
        f"{[f['output'], f['response']]} (instruction); name the data's fields in the source's `fields` map, e.g. "
        "{instruction: question, output: answer}"
    )


def _names(fields: dict[str, str] | None) -> dict[str, str]:
    canon = ("messages", "prompt", "completion", "instruction", "input", "output", "response", "system", "id")
    fields = dict(fields or {})
    unknown = sorted(set(fields) - set(canon))
    if unknown:
        raise SftDataError(
            f"unknown canonical field name(s) {unknown} in `fields`; the canonical names are {list(canon)}"
        )
    return {c: fields.get(c, c) for c in canon}


def _output_name(record: dict, f: dict[str, str]) -> str | None:
    return next((f[c] for c in _OUTPUT_NAMES if f[c] in record), None)


def _field(record: dict, name: str, where: str):
    if name not in record:
        raise SftDataError(
            f"{where}: no field {name!r} (fields found: {sorted(record)}). Name the data's field in "
            "the source's `fields` map."
        )
    return record[name]


def _turns(value, where: str, what: str) -> list[dict]:
    if isinstance(value, str):
        raise SftDataError(f"{where}: {what} must be a list of turns here")
    if not isinstance(value, list):
        raise SftDataError(f"{where}: {what} must be a list of {{role, content}} turns, got {type(value).__name__}")
    out = []
    for i, t in enumerate(value):
        if not isinstance(t, dict) or "role" not in t or "content" not in t:
            found = sorted(t) if isinstance(t, dict) else type(t).__name__
            raise SftDataError(f"{where}: turn {i} of {what} needs 'role' and 'content' (found: {found})")
        content = t["content"]
        if not isinstance(content, str):
            raise SftDataError(f"{where}: turn {i} of {what}: content must be a string, got {type(content).__name__}")
        out.append({"role": str(t["role"]), "content": content})
    return out


def to_conversation(
    record: dict,
    *,
    where: str,
    source: str = "",
    fmt: str = "auto",
    fields: dict[str, str] | None = None,
    placeholders: list[str] | tuple[str, ...] = (),
) -> dict:
    """One record as a conversation (module docstring). Content is not normalized here (:mod:`azllm.sft.clean`
    does it)."""
    f = _names(fields)
    if fmt == "auto":
        try:
            fmt = detect_format(record, fields)
        except SftDataError as e:
            raise SftDataError(f"{where}: {e}") from None
    elif fmt not in FORMATS:
        raise SftDataError(f"unknown format {fmt!r}; choose auto or one of {list(FORMATS)}")
    placeholder = False
    if fmt == "messages":
        messages = _turns(_field(record, f["messages"], where), where, f"field {f['messages']!r}")
    elif fmt == "prompt_completion":
        prompt, completion = _field(record, f["prompt"], where), _field(record, f["completion"], where)
        messages = (
            [{"role": "user", "content": prompt}]
            if isinstance(prompt, str)
            else _turns(prompt, where, f"field {f['prompt']!r}")
        )
        messages += (
            [{"role": "assistant", "content": completion}]
            if isinstance(completion, str)
            else _turns(completion, where, f"field {f['completion']!r}")
        )
    else:
        instruction = _field(record, f["instruction"], where)
        out_name = _output_name(record, f)
        if out_name is None:
            raise SftDataError(
                f"{where}: no field {f['output']!r} or {f['response']!r} (fields found: "
                f"{sorted(record)}). Name the data's answer field in the source's `fields` map."
            )
        if "input" in (fields or {}):  # named explicitly: it must be there
            _field(record, f["input"], where)
        inp = record.get(f["input"])
        user = str(instruction)
        if inp is not None and str(inp).strip():
            if is_placeholder(str(inp), placeholders):
                placeholder = True
            else:
                user = f"{user}\n\n{inp}"
        messages = [{"role": "user", "content": user}, {"role": "assistant", "content": str(record[out_name])}]
    system = record.get(f["system"]) if fmt != "messages" else None
    if isinstance(system, str) and system.strip():
        messages = [{"role": "system", "content": system}, *messages]
    rid = record.get(f["id"])
    rid = rid if rid is not None else where.rsplit("/", 1)[-1]  # no id field: the file name and line
    return {
        "id": f"{source}:{rid}",
        "where": where,
        "source": source,
        "messages": messages,
        "placeholder_input": placeholder,
    }


def check_conversation(messages: list[dict]) -> str | None:
    """What is structurally wrong with a conversation (None: nothing).

    >>> check_conversation([{"role": "user", "content": "a"}])
    'no assistant turn'
    >>> check_conversation([{"role": "human", "content": "a"}, {"role": "assistant", "content": "b"}])
    "unknown role 'human' (turn 0; roles: system, user, assistant)"
    """
    for i, m in enumerate(messages):
        if m["role"] not in ROLES:
            return f"unknown role {m['role']!r} (turn {i}; roles: {', '.join(ROLES)})"
        if m["role"] == "system" and i != 0:
            return f"a system turn that is not the first (turn {i})"
    if not any(m["role"] == "assistant" for m in messages):
        return "no assistant turn"
    if messages[-1]["role"] != "assistant":
        return f"ends on a {messages[-1]['role']} turn (nothing to learn after it)"
    return None


_FIX = {"error": "Fix the record, or set sft.on_bad_record: drop to drop and count such records."}


def read_conversations(
    r: Resolved,
    *,
    source: str,
    fmt: str = "auto",
    fields: dict[str, str] | None = None,
    placeholders: list[str] | tuple[str, ...] = (),
    on_bad: str = "error",
) -> tuple[list, dict]:
    """Every record of a source as a conversation: ``(conversations, counts)``. ``counts``: ``read``,
    ``placeholder_inputs``, and ``bad: {reason: n}`` for records dropped with ``on_bad="drop"``; with
    ``on_bad="error"`` a bad record raises :class:`SftDataError` naming it."""
    convs, bad, read, placeholder = [], {}, 0, 0
    first_fmt = None
    for where, rec in iter_records(r):
        read += 1
        if fmt == "auto" and first_fmt is None:
            try:
                first_fmt = detect_format(rec, fields)
            except SftDataError as e:
                raise SftDataError(f"{where}: {e}") from None
        conv = to_conversation(
            rec, where=where, source=source, fmt=first_fmt or fmt, fields=fields, placeholders=placeholders
        )
        why = check_conversation(conv["messages"])
        if why is not None:
            if on_bad == "error":
                raise SftDataError(f"{where}: {why}. {_FIX['error']}")
            key = why.split(" (")[0]
            bad[key] = bad.get(key, 0) + 1
            continue
        placeholder += conv["placeholder_input"]
        convs.append(conv)
    return convs, {"read": read, "placeholder_inputs": placeholder, "bad": bad}
