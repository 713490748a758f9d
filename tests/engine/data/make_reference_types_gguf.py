#!/usr/bin/env python3
"""Writes reference_types.gguf: a small GGUF made by gguf-py (llama.cpp's own
Python package), the independent reference for kvscope's GGUF reader and
dequantisation tests.

It holds metadata of every GGUF value type and, for each tensor type kvscope
converts to fp32, a tensor `q.<TYPE>` in that type plus `expected.<TYPE>`, the
fp32 values gguf-py's dequantize() gives for the same bytes.

Run by hand when the reference needs to change (not in CI):
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install gguf==0.19.0 numpy
    /tmp/ref/bin/python tests/engine/data/make_reference_types_gguf.py
"""

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType, GGUFWriter
from gguf.quants import dequantize, quantize

OUT = Path(__file__).with_name("reference_types.gguf")
ROWS, COLS = 3, 512  # COLS is a multiple of every block size (32 and 256)
rng = np.random.default_rng(20261121)

writer = GGUFWriter(str(OUT), arch="reference")
writer.add_uint8("test.u8", 200)
writer.add_int8("test.i8", -100)
writer.add_uint16("test.u16", 60000)
writer.add_int16("test.i16", -30000)
writer.add_uint32("test.u32", 4000000000)
writer.add_int32("test.i32", -2000000000)
writer.add_float32("test.f32", 0.15625)
writer.add_uint64("test.u64", 2**63 + 5)
writer.add_int64("test.i64", -(2**62))
writer.add_float64("test.f64", 2.718281828459045)
writer.add_bool("test.bool_true", True)
writer.add_bool("test.bool_false", False)
writer.add_string("test.string", "héllo, κόσμε ✓")
writer.add_array("test.array_i32", [1, -2, 3])
writer.add_array("test.array_string", ["a", "", "ünï"])
writer.add_array("test.array_nested", [[1, 2], [3]])
writer.add_key_value("test.array_f32", [0.5, -1.25], GGUFValueType.ARRAY, GGUFValueType.FLOAT32)

values = (rng.standard_normal((ROWS, COLS)) * 0.7).astype(np.float32)


def raw_k_quant_blocks(qtype: T, block_bytes: int, scale_offsets: list[int]) -> np.ndarray:
    """Random k-quant blocks whose fp16 scales are finite and moderate."""
    blocks = rng.integers(0, 256, size=(ROWS, COLS // 256, block_bytes), dtype=np.uint8)
    for offset in scale_offsets:
        scales = (rng.uniform(0.001, 0.05, size=(ROWS, COLS // 256))).astype(np.float16)
        blocks[:, :, offset : offset + 2] = scales.view(np.uint8).reshape(ROWS, COLS // 256, 2)
    return blocks.reshape(ROWS, -1)


cases = {
    T.F32: values,
    T.F16: values.astype(np.float16),
    T.BF16: quantize(values, T.BF16),
    T.Q4_0: quantize(values, T.Q4_0),
    T.Q4_1: quantize(values, T.Q4_1),
    T.Q5_0: quantize(values, T.Q5_0),
    T.Q5_1: quantize(values, T.Q5_1),
    T.Q8_0: quantize(values, T.Q8_0),
    T.Q4_K: raw_k_quant_blocks(T.Q4_K, 144, [0, 2]),
    T.Q5_K: raw_k_quant_blocks(T.Q5_K, 176, [0, 2]),
    T.Q6_K: raw_k_quant_blocks(T.Q6_K, 210, [208]),
    # Last, so the blocks above keep their random bytes. Q2_K: 16 scale
    # bytes, 64 code bytes, then d and dmin; Q3_K: 32 high-bit bytes, 64 code
    # bytes, 12 scale bytes, then d.
    T.Q2_K: raw_k_quant_blocks(T.Q2_K, 84, [80, 82]),
    T.Q3_K: raw_k_quant_blocks(T.Q3_K, 110, [108]),
}

for qtype, data in cases.items():
    raw_dtype = None if qtype in (T.F32, T.F16) else qtype
    writer.add_tensor(f"q.{qtype.name}", data, raw_dtype=raw_dtype)
    expected = dequantize(data, qtype).astype(np.float32).reshape(ROWS, COLS)
    assert np.isfinite(expected).all(), qtype.name
    writer.add_tensor(f"expected.{qtype.name}", expected)

writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
