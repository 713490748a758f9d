#!/usr/bin/env python3
"""Golden logits for the tiny random-weight models of each architecture
(tests/engine/data/make_tiny_llama_gguf.py writes them), from Hugging Face
transformers loading the same GGUF files in fp32; llama.cpp (llama-cpp-python)
scores them too and must agree, as a check on the reference itself.

Writes tests/engine/data/golden_tiny_archs.json: per model, a fixed sequence
of token ids and every position's full logits.

transformers' GGUF reader leaves two of these models' settings at its
defaults, which the tiny shapes do not have, so they are passed as the file
says them: Qwen3's head width (attention.key_length; the mapping lacks it)
and Gemma 3's query scale (query_pre_attn_scalar, 256 by default; llama.cpp
scales by the head width, as Gemma 3's configs set it for every size but 27B);
nor does it read Llama 3's rope_freqs tensor, whose settings are given too.

Run once by hand (not in CI; needs network for pip):
    python3 -m venv /tmp/ref
    /tmp/ref/bin/pip install torch transformers accelerate gguf llama-cpp-python
    /tmp/ref/bin/python scripts/reference/make_tiny_arch_golden.py
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "engine" / "data"
OUT = DATA / "golden_tiny_archs.json"
TOKENS = 32  # past the tiny Gemma's sliding window of 8 several times
MODELS = {
    "tiny_llama.gguf": {},
    "tiny_qwen2.gguf": {},
    "tiny_qwen3.gguf": {"head_dim": 128},
    "tiny_gemma3.gguf": {"query_pre_attn_scalar": 32},
    # Llama 3's scaled RoPE: transformers' GGUF reader skips the rope_freqs
    # tensor, so it is given the settings the tensor was made from
    # (tests/engine/data/make_tiny_llama_gguf.py); llama.cpp reads the tensor.
    "tiny_llama3.gguf": {"rope_parameters": {
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
}


def main() -> None:
    import llama_cpp
    import transformers
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM

    rng = np.random.default_rng(7)
    ids = [int(i) for i in rng.integers(3, 271, TOKENS)]
    models = []
    for name, overrides in MODELS.items():
        path = DATA / name
        hf = AutoModelForCausalLM.from_pretrained(DATA, gguf_file=name, dtype=torch.float32,
                                                  attn_implementation="eager", **overrides)
        hf.eval()
        with torch.no_grad():
            logits = hf(torch.tensor([ids])).logits[0].float().numpy()
        llm = Llama(str(path), verbose=False, logits_all=True, n_ctx=64, n_threads=2)
        llm.eval(ids)
        llama_logits = np.array(llm.scores[:TOKENS], dtype=np.float32)
        gap = float(np.abs(llama_logits - logits).max())
        spread = float(np.abs(logits).max())
        print(f"{name}: transformers vs llama.cpp max |diff| {gap:.2e} (logits up to {spread:.2f})")
        assert gap < 0.05 * spread, f"the references disagree on {name}"
        models.append({
            "model_file": name,
            "model_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "transformers_overrides": overrides,
            "llama_cpp_max_abs_diff": round(gap, 6),
            "ids": ids,
            "logits": [[round(float(v), 4) for v in row] for row in logits],
        })
    golden = {
        "generated_by": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "llama_cpp_python": llama_cpp.__version__,
        },
        "models": models,
    }
    OUT.write_text(json.dumps(golden, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
