"""azllm.gguf_file.read_gguf against gguf-py's GGUFReader, field for field and tensor for tensor: on the packaged
SmolLM2-135M-Instruct GGUF (49,152 tokens, 48,900 merges, llama.cpp's own writer) and on files gguf-py's writer
makes with every value type, arrays of each, several ggml types, in both byte orders."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFEndian, GGUFReader, GGUFValueType, GGUFWriter

from azllm.gguf import smollm2_gguf
from azllm.gguf_file import GGUFTensor, read_gguf


def _reference(path) -> tuple[dict, list[GGUFTensor]]:
    r = GGUFReader(str(path))
    fields = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}  # its header, as fields
    tensors = [GGUFTensor(t.name, t.tensor_type.name, int(t.n_elements), int(t.n_bytes)) for t in r.tensors]
    return fields, tensors


def test_the_packaged_smollm2_file_reads_as_gguf_py_reads_it():
    meta = read_gguf(smollm2_gguf())
    assert (meta.fields, meta.tensors) == _reference(smollm2_gguf())
    assert meta.version == 3 and len(meta.fields["tokenizer.ggml.tokens"]) == 49152
    assert meta.fields["tokenizer.ggml.pre"] == "smollm" and len(meta.tensors) == 272


@pytest.mark.parametrize("order", [GGUFEndian.LITTLE, GGUFEndian.BIG])
def test_every_value_type_and_tensor_type_reads_as_gguf_py_reads_it(tmp_path, order):
    path = tmp_path / "all.gguf"
    w = GGUFWriter(str(path), "llama", endianess=order)
    for kind, value in [
        (GGUFValueType.UINT8, 250),
        (GGUFValueType.INT8, -7),
        (GGUFValueType.UINT16, 65000),
        (GGUFValueType.INT16, -300),
        (GGUFValueType.UINT32, 4_000_000_000),
        (GGUFValueType.INT32, -2_000_000_000),
        (GGUFValueType.FLOAT32, 0.1),  # read back as float32's nearest value, by both
        (GGUFValueType.UINT64, 2**63 + 5),
        (GGUFValueType.INT64, -(2**62)),
        (GGUFValueType.FLOAT64, -1e300),
        (GGUFValueType.BOOL, True),
        (GGUFValueType.STRING, "Bakı, evlərimizdən — 🙂"),
    ]:
        w.add_key_value(f"t.{kind.name.lower()}", value, kind)
    w.add_array("tokenizer.ggml.tokens", ["<s>", "ə", "", "Ġsalam", "\n"])
    w.add_array("tokenizer.ggml.scores", [0.0, -1000.0, 1.5])
    w.add_array("tokenizer.ggml.token_type", [1, 2, 3])
    w.add_key_value("t.bools", [True, False], GGUFValueType.ARRAY, GGUFValueType.BOOL)
    w.add_key_value("t.int64s", [-1, 2**40], GGUFValueType.ARRAY, GGUFValueType.INT64)
    w.add_tensor("a.weight", np.arange(12, dtype=np.float32).reshape(3, 4))  # the writer swaps a big-endian file's
    w.add_tensor("b.weight", np.ones((2, 64), dtype=np.float16))
    w.add_tensor("c.weight", np.zeros((2, 34), dtype=np.uint8), raw_dtype=GGMLQuantizationType.Q8_0)  # 2x32 weights
    w.add_tensor("d.weight", np.zeros((1, 144), dtype=np.uint8), raw_dtype=GGMLQuantizationType.Q4_K)  # 256
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    meta = read_gguf(path)
    assert (meta.fields, meta.tensors) == _reference(path)
    assert [t.type for t in meta.tensors] == ["F32", "F16", "Q8_0", "Q4_K"]
    assert [(t.weights, t.bytes) for t in meta.tensors] == [(12, 48), (128, 256), (64, 68), (256, 144)]
    assert meta.fields["t.string"] == "Bakı, evlərimizdən — 🙂"


def test_a_file_that_is_not_gguf_v2_or_v3_is_refused_clearly(tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"GGML" + bytes(20))
    with pytest.raises(ValueError, match=r"x\.gguf: not a GGUF file \(it starts with b'GGML'\)"):
        read_gguf(tmp_path / "x.gguf")
    (tmp_path / "empty.gguf").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.gguf: not a GGUF file \(it starts with b''\)"):
        read_gguf(tmp_path / "empty.gguf")
    (tmp_path / "v1.gguf").write_bytes(b"GGUF" + (1).to_bytes(4, "little") + bytes(16))
    with pytest.raises(ValueError, match="GGUF version 1; versions 2 and 3 are read"):
        read_gguf(tmp_path / "v1.gguf")
