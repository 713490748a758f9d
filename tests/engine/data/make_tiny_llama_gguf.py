#!/usr/bin/env python3
"""Writes the tiny test models: GGUF files of random weights small enough to
commit, one per architecture kvscope runs.

tiny_llama.gguf (about 100 KB) serves the tests of the serving path that need
a model file but not the real model's outputs (the app's engine controller,
the serving session, recordings): it loads through the same GGUF reader,
tokenizer and CPU backend as SmolLM2, so those tests run where the real model
has not been fetched. tiny_qwen2.gguf, tiny_qwen3.gguf and tiny_gemma3.gguf
carry what each architecture adds to Llama's block (QKV biases; per-head QK
norms and a head wider than width / heads; QK norms, post-norms, GeGLU, a
scaled embedding and a sliding window of 8 in five of six layers), and
tiny_llama3.gguf Llama 3's scaled RoPE (a rope_freqs tensor), for
scripts/reference/make_tiny_arch_golden.py to score with transformers.

Shape: hidden 64, 2 query heads sharing 1 KV head (GQA) of 32 dimensions
(the CPU attention kernels want multiples of 32; Qwen3's are 128 wide), a
byte-level BPE vocabulary of the 256 byte symbols, a few merges and
SmolLM2's three special tokens (so its chat template applies); matrices in
q8_0, norms and biases in f32, the output tied to the embedding.

Run by hand when they need to change (not in CI):
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install gguf==0.19.0 numpy
    /tmp/ref/bin/python tests/engine/data/make_tiny_llama_gguf.py
"""

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter, TokenType
from gguf.quants import quantize

HERE = Path(__file__).parent


@dataclass
class Tiny:
    arch: str
    file: str
    seed: int
    layers: int = 2
    ffn: int = 128
    head_dim: int = 32
    rope_base: float = 10000.0
    qkv_bias: bool = False
    qk_norm: bool = False
    post_norms: bool = False
    sliding_window: int = 0
    # Llama 3's RoPE scaling, as its GGUF files carry it: a rope_freqs tensor
    # of per-pair frequency divisors. The context it was trained at is tiny
    # here (64), so the tiny head's pairs span all three of its regimes.
    llama3_rope: bool = False


# Llama 3's settings (factor 8, low and high frequency factors 1 and 4) over
# an original context of 64 positions.
LLAMA3_FACTOR, LLAMA3_LOW, LLAMA3_HIGH, LLAMA3_ORIGINAL = 8.0, 1.0, 4.0, 64


def llama3_rope_divisors(head_dim: int, base: float) -> np.ndarray:
    """Each pair's divisor of its RoPE frequency: 1 for wavelengths shorter
    than original / high, the factor past original / low, and between them
    a blend that is linear in original / wavelength."""
    divisors = []
    for pair in range(head_dim // 2):
        wavelength = 2 * math.pi * base ** (2 * pair / head_dim)
        if wavelength < LLAMA3_ORIGINAL / LLAMA3_HIGH:
            divisors.append(1.0)
        elif wavelength > LLAMA3_ORIGINAL / LLAMA3_LOW:
            divisors.append(LLAMA3_FACTOR)
        else:
            blend = (LLAMA3_ORIGINAL / wavelength - LLAMA3_LOW) / (LLAMA3_HIGH - LLAMA3_LOW)
            divisors.append(1.0 / ((1.0 - blend) / LLAMA3_FACTOR + blend))
    return np.array(divisors, dtype=np.float32)


MODELS = [
    Tiny("llama", "tiny_llama.gguf", 20261123),
    Tiny("qwen2", "tiny_qwen2.gguf", 20261126, rope_base=1e6, qkv_bias=True),
    Tiny("qwen3", "tiny_qwen3.gguf", 20261127, head_dim=128, rope_base=1e6, qk_norm=True),
    Tiny("gemma3", "tiny_gemma3.gguf", 20261128, layers=6, ffn=64, rope_base=1e6, qk_norm=True,
         post_norms=True, sliding_window=8),
    Tiny("llama", "tiny_llama3.gguf", 20261129, rope_base=500000.0, llama3_rope=True),
]
HIDDEN, HEADS, KV_HEADS = 64, 2, 1


def byte_symbols():
    """GPT-2's byte-to-symbol table: printable bytes stand for themselves,
    the rest move to code points from 256 up."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    symbols = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in symbols:
            symbols[b] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ t", "h e", "Ġt he", "i n", "e r", "a n", "o n", "Ġ a", "r e", "Ġ s", "e n", "Ġ w"]
TOKENS = SPECIALS + byte_symbols() + [merge.replace(" ", "") for merge in MERGES]
TYPES = [TokenType.CONTROL] * len(SPECIALS) + [TokenType.NORMAL] * (len(TOKENS) - len(SPECIALS))
VOCAB = len(TOKENS)


def write(m: Tiny) -> None:
    out = HERE / m.file
    rng = np.random.default_rng(m.seed)
    writer = GGUFWriter(str(out), arch=m.arch)
    writer.add_name(f"kvscope tiny test {m.arch}")
    writer.add_block_count(m.layers)
    writer.add_context_length(1024)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(m.ffn)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(m.rope_base)
    writer.add_layer_norm_rms_eps(1e-5 if m.arch == "llama" else 1e-6)
    if m.arch == "llama":
        writer.add_rope_dimension_count(m.head_dim)
    else:
        writer.add_key_length(m.head_dim)
        writer.add_value_length(m.head_dim)
    if m.sliding_window:
        writer.add_sliding_window(m.sliding_window)
    writer.add_vocab_size(VOCAB)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(TOKENS)
    writer.add_token_types(TYPES)
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)

    def matrix(name, rows, cols):
        # Scaled so activations neither vanish nor explode over the layers.
        values = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)
        writer.add_tensor(name, quantize(values, T.Q8_0), raw_dtype=T.Q8_0)

    def norm(name, length=HIDDEN):
        writer.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(length)).astype(np.float32))

    def bias(name, length):
        writer.add_tensor(name, (0.1 * rng.standard_normal(length)).astype(np.float32))

    q_width, kv_width = HEADS * m.head_dim, KV_HEADS * m.head_dim
    matrix("token_embd.weight", VOCAB, HIDDEN)
    if m.llama3_rope:
        writer.add_tensor("rope_freqs.weight", llama3_rope_divisors(m.head_dim, m.rope_base))
    for layer in range(m.layers):
        p = f"blk.{layer}."
        norm(p + "attn_norm.weight")
        matrix(p + "attn_q.weight", q_width, HIDDEN)
        matrix(p + "attn_k.weight", kv_width, HIDDEN)
        matrix(p + "attn_v.weight", kv_width, HIDDEN)
        if m.qkv_bias:
            bias(p + "attn_q.bias", q_width)
            bias(p + "attn_k.bias", kv_width)
            bias(p + "attn_v.bias", kv_width)
        if m.qk_norm:
            norm(p + "attn_q_norm.weight", m.head_dim)
            norm(p + "attn_k_norm.weight", m.head_dim)
        matrix(p + "attn_output.weight", HIDDEN, q_width)
        if m.post_norms:
            norm(p + "post_attention_norm.weight")
        norm(p + "ffn_norm.weight")
        matrix(p + "ffn_gate.weight", m.ffn, HIDDEN)
        matrix(p + "ffn_up.weight", m.ffn, HIDDEN)
        matrix(p + "ffn_down.weight", HIDDEN, m.ffn)
        if m.post_norms:
            norm(p + "post_ffw_norm.weight")
    norm("output_norm.weight")

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {out} ({out.stat().st_size} bytes, vocab {VOCAB})")


if __name__ == "__main__":
    for model in MODELS:
        write(model)
