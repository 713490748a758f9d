#!/usr/bin/env python3
"""Writes tiny_llama.gguf: a Llama-architecture model of random weights small
enough to commit (about 100 KB), for tests of the serving path that need a
model file but not the real model's outputs (the app's engine controller, the
serving session, recordings). It loads through the same GGUF reader,
tokenizer and CPU backend as SmolLM2, so those tests run where the real model
has not been fetched.

Shape: 2 layers, hidden 64, 2 query heads sharing 1 KV head (GQA) of 32
dimensions (the CPU attention kernels want multiples of 32), FFN 128, a
byte-level BPE vocabulary of the 256 byte symbols, a few merges and
SmolLM2's three special tokens (so its chat template applies); matrices in
q8_0, norms in f32, the output tied to the embedding.

Run by hand when it needs to change (not in CI):
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install gguf==0.19.0 numpy
    /tmp/ref/bin/python tests/engine/data/make_tiny_llama_gguf.py
"""

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter, TokenType
from gguf.quants import quantize

OUT = Path(__file__).with_name("tiny_llama.gguf")
LAYERS, HIDDEN, HEADS, KV_HEADS, FFN = 2, 64, 2, 1, 128
HEAD_DIM = HIDDEN // HEADS
rng = np.random.default_rng(20261123)


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
tokens = SPECIALS + byte_symbols()
for merge in MERGES:
    tokens.append(merge.replace(" ", ""))
types = [TokenType.CONTROL] * len(SPECIALS) + [TokenType.NORMAL] * (len(tokens) - len(SPECIALS))
VOCAB = len(tokens)

writer = GGUFWriter(str(OUT), arch="llama")
writer.add_name("kvscope tiny test llama")
writer.add_block_count(LAYERS)
writer.add_context_length(1024)
writer.add_embedding_length(HIDDEN)
writer.add_feed_forward_length(FFN)
writer.add_head_count(HEADS)
writer.add_head_count_kv(KV_HEADS)
writer.add_rope_freq_base(10000.0)
writer.add_layer_norm_rms_eps(1e-5)
writer.add_rope_dimension_count(HEAD_DIM)
writer.add_vocab_size(VOCAB)
writer.add_tokenizer_model("gpt2")
writer.add_tokenizer_pre("default")
writer.add_token_list(tokens)
writer.add_token_types(types)
writer.add_token_merges(MERGES)
writer.add_bos_token_id(1)
writer.add_eos_token_id(2)


def matrix(name, rows, cols):
    # Scaled so activations neither vanish nor explode over two layers.
    values = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)
    writer.add_tensor(name, quantize(values, T.Q8_0), raw_dtype=T.Q8_0)


def norm(name):
    writer.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))


matrix("token_embd.weight", VOCAB, HIDDEN)
for layer in range(LAYERS):
    p = f"blk.{layer}."
    norm(p + "attn_norm.weight")
    matrix(p + "attn_q.weight", HEADS * HEAD_DIM, HIDDEN)
    matrix(p + "attn_k.weight", KV_HEADS * HEAD_DIM, HIDDEN)
    matrix(p + "attn_v.weight", KV_HEADS * HEAD_DIM, HIDDEN)
    matrix(p + "attn_output.weight", HIDDEN, HEADS * HEAD_DIM)
    norm(p + "ffn_norm.weight")
    matrix(p + "ffn_gate.weight", FFN, HIDDEN)
    matrix(p + "ffn_up.weight", FFN, HIDDEN)
    matrix(p + "ffn_down.weight", HIDDEN, FFN)
norm("output_norm.weight")

writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
print(f"wrote {OUT} ({OUT.stat().st_size} bytes, vocab {VOCAB})")
