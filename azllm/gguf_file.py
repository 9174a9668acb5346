"""A GGUF file's metadata and tensor table, read from its header: what gguf-py's ``GGUFReader`` gives (each
field's ``contents()``; each tensor's ggml type, weights and bytes), without a numpy view per value.

gguf-py 0.19's reader maps every value of every field as its own memmap slice: SmolLM2's 49,152 tokens, their
types and 48,900 merges are ~2.9 million slices, ~4 s a file on 2 cores, and a deployment reads three files.
:func:`read_gguf` reads the same bytes with ``struct`` (GGUF v2 and v3, either byte order), in ~0.1 s; tests check
it field for field and tensor for tensor against ``GGUFReader`` on real files. ggml's types and block sizes are
gguf-py's own tables (``GGMLQuantizationType``, ``GGML_QUANT_SIZES``).

>>> meta = read_gguf("model-Q8_0.gguf")  # doctest: +SKIP
>>> meta.fields["tokenizer.ggml.pre"], meta.tensors[0]  # doctest: +SKIP
('smollm', GGUFTensor(name='output_norm.weight', type='F32', weights=64, bytes=256))
"""

from __future__ import annotations

import mmap
import os
from struct import calcsize, unpack_from
from typing import Any, NamedTuple

__all__ = ["read_gguf", "GGUFMeta", "GGUFTensor"]

_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
"""GGUF value type -> ``struct`` code (8 is a string, 9 an array)."""
_SIZE = {code: calcsize("<" + code) for code in _SCALAR.values()}
_STRING, _ARRAY = 8, 9


class GGUFTensor(NamedTuple):
    name: str
    type: str  # ggml's name: "F16", "Q8_0", "Q4_K", ...
    weights: int
    bytes: int


class GGUFMeta(NamedTuple):
    version: int
    fields: dict[str, Any]  # key -> value as GGUFReader's ``field.contents()`` gives it
    tensors: list[GGUFTensor]  # in the file's order


class _Cursor:
    """Reads values one after the other from ``buf`` in byte order ``order`` (``"<"`` or ``">"``)."""

    def __init__(self, buf, order: str):
        self.buf, self.order, self.pos = buf, order, 0

    def scalar(self, code: str):
        (value,) = unpack_from(self.order + code, self.buf, self.pos)
        self.pos += _SIZE[code]
        return value

    def string(self) -> str:
        n = self.scalar("Q")
        self.pos += n
        return str(self.buf[self.pos - n : self.pos], "utf-8")

    def value(self, kind: int) -> Any:
        if kind in _SCALAR:
            return self.scalar(_SCALAR[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise ValueError(f"unknown GGUF value type {kind} at byte {self.pos - 4}")
        sub, n = self.scalar("I"), self.scalar("Q")
        if sub == _STRING:
            return [self.string() for _ in range(n)]
        if sub not in _SCALAR:
            raise ValueError(f"GGUF arrays of type {sub} are not read (byte {self.pos})")
        code = _SCALAR[sub]
        out = list(unpack_from(f"{self.order}{n}{code}", self.buf, self.pos))
        self.pos += n * _SIZE[code]
        return out


def read_gguf(path: str | os.PathLike) -> GGUFMeta:
    """Every metadata field and the tensor table of the GGUF file at ``path`` (no tensor data is read).

    Raises ``ValueError`` for a file that is not GGUF v2 or v3."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    with open(path, "rb") as f:
        head = f.read(4)
        if head != b"GGUF":  # an empty file included (it cannot be mapped)
            raise ValueError(f"{path}: not a GGUF file (it starts with {head!r})")
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with buf:
        (version,) = unpack_from("<I", buf, 4)
        order = ">" if version & 0xFFFF == 0 else "<"  # as gguf-py tells a file of the other byte order
        c = _Cursor(buf, order)
        c.pos = 4
        version = c.scalar("I")
        if version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {version}; versions 2 and 3 are read")
        n_tensors, n_fields = c.scalar("Q"), c.scalar("Q")
        fields = {}
        for _ in range(n_fields):
            key = c.string()
            fields[key] = c.value(c.scalar("I"))
        tensors = []
        for _ in range(n_tensors):
            name, n_dims = c.string(), c.scalar("I")
            weights = 1
            for _ in range(n_dims):
                weights *= c.scalar("Q")
            kind = GGMLQuantizationType(c.scalar("I"))
            c.scalar("Q")  # the data's offset
            block, size = GGML_QUANT_SIZES[kind]
            tensors.append(GGUFTensor(name, kind.name, weights, weights * size // block))
    return GGUFMeta(version, fields, tensors)
