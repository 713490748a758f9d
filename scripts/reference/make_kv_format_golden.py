#!/usr/bin/env python3
"""Reference bytes and values for kvscope's KV row formats, from libraries
nobody on the project wrote: gguf-py (ggml's own Python port of its
quantisers, "bit-exact with ggml-quants.c") for q8_0, q4_0, q4_1 and bf16,
numpy for f16, and ml_dtypes for fp8 E4M3 ("FN", the OCP variant).

Writes tests/engine/data/golden_kv_formats.json: the input rows (float32 bit
patterns) and, per format, each row's bytes as the reference encodes them and
those bytes decoded by the reference (float32 bit patterns). The fp8 rows'
layout (a float32 scale of amax / 448, then one code per value) is kvscope's
own; only the codes come from ml_dtypes. tst_kv_formats reads the file.

Run once by hand (not in CI; needs network for pip):
    python3 -m venv /tmp/kvref
    /tmp/kvref/bin/pip install gguf ml_dtypes numpy
    /tmp/kvref/bin/python scripts/reference/make_kv_format_golden.py
"""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
from gguf import GGMLQuantizationType, quants

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "engine" / "data" / "golden_kv_formats.json"
HEAD_DIM = 64


def rows() -> np.ndarray:
    rng = np.random.default_rng(20261126)
    out = [
        rng.standard_normal(HEAD_DIM),
        rng.standard_normal(HEAD_DIM) * 0.01,
        rng.standard_normal(HEAD_DIM) * 300.0,
        np.zeros(HEAD_DIM),
        np.full(HEAD_DIM, -2.5),
    ]
    outlier = rng.standard_normal(HEAD_DIM) * 0.1
    outlier[5] = 40.0  # one channel dominates a group, as keys' outliers do
    outlier[40] = -40.0
    out.append(outlier)
    # Values on the codes' half steps: ties for every rounding rule.
    out.append(np.concatenate([np.arange(32) * 0.5 - 8.0, np.arange(32) * 0.25 + 0.125]))
    # fp16's and fp8's small end (subnormals) beside ordinary values.
    tiny = rng.standard_normal(HEAD_DIM) * 1e-6
    tiny[:8] = [6e-8, -6e-8, 1e-7, 3e-5, -3e-5, 6.1e-5, 1.0, -1.0]
    out.append(tiny)
    out.append(rng.uniform(-60000.0, 60000.0, HEAD_DIM))  # fp16's large end
    out.append(rng.laplace(0.0, 2.0, HEAD_DIM))
    return np.array(out, dtype=np.float32)


def hex_floats(values: np.ndarray) -> list[str]:
    return [f"{int(v):08x}" for v in np.asarray(values, dtype=np.float32).view(np.uint32)]


def gguf_format(row: np.ndarray, qtype: GGMLQuantizationType) -> tuple[bytes, np.ndarray]:
    encoded = quants.quantize(row, qtype)
    decoded = quants.dequantize(encoded, qtype).astype(np.float32)
    return encoded.tobytes(), decoded


def f16_format(row: np.ndarray) -> tuple[bytes, np.ndarray]:
    half = row.astype(np.float16)
    return half.tobytes(), half.astype(np.float32)


def fp8_format(row: np.ndarray) -> tuple[bytes, np.ndarray]:
    amax = np.float32(np.abs(row).max())
    scale = np.float32(amax / np.float32(448.0)) if amax > 0 else np.float32(1.0)
    codes = (row / scale).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    decoded = (scale * codes.astype(np.float32)).astype(np.float32)
    return np.array([scale], dtype=np.float32).tobytes() + codes.tobytes(), decoded


def main() -> None:
    inputs = rows()
    formats = {
        "f16": f16_format,
        "bf16": lambda r: gguf_format(r, GGMLQuantizationType.BF16),
        "q8_0": lambda r: gguf_format(r, GGMLQuantizationType.Q8_0),
        "q4_0": lambda r: gguf_format(r, GGMLQuantizationType.Q4_0),
        "q4_1": lambda r: gguf_format(r, GGMLQuantizationType.Q4_1),
        "fp8": fp8_format,
    }
    out = {
        "source": "scripts/reference/make_kv_format_golden.py (gguf-py, numpy, ml_dtypes)",
        "head_dim": HEAD_DIM,
        "rows": [hex_floats(r) for r in inputs],
        "formats": {},
    }
    for name, encode in formats.items():
        encoded = [encode(r) for r in inputs]
        out["formats"][name] = {
            "bytes": [e.hex() for e, _ in encoded],
            "decoded": [hex_floats(d) for _, d in encoded],
        }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
