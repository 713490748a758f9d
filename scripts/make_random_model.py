#!/usr/bin/env python3
"""Writes a GGUF model of random weights with SmolLM2-135M-Instruct's shape and
storage: 30 layers, hidden 576, 9 query heads sharing 3 KV heads of 64, FFN
1536, vocabulary 49152, the embedding in q8_0 (tied to the output), the other
matrices in q4_1, norms in f32. Each step then moves the same bytes as with
the real model, so speed figures taken with it stand for the real model's
(what it prints is noise).

For GPU machines the ~100 MB real model cannot reach: scripts/gpu-check.sh
makes one when it has no model. Python's standard library only; a few
seconds.

The tokenizer is byte-level (SmolLM2's three special tokens, the 256 byte
symbols, placeholder tokens up to the vocabulary size, no merges): a prompt
takes one token per byte, about four times as many as with SmolLM2's merges.

    scripts/make_random_model.py OUT.gguf [--layers N] [--seed S]
"""

import argparse
import math
import random
import struct
import sys
from pathlib import Path

HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, LAYERS = 576, 9, 3, 1536, 49152, 30
HEAD_DIM = HIDDEN // HEADS
CONTEXT = 8192
ALIGNMENT = 32

# ggml tensor types and their blocks: (id, values per block, bytes per block)
F32 = (0, 1, 4)
Q4_1 = (3, 32, 20)  # f16 scale d, f16 minimum m, 32 four-bit values
Q8_0 = (8, 32, 34)  # f16 scale d, 32 int8 values

# GGUF metadata value types
UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CONTROL, NORMAL = 3, 1


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


def gguf_string(text):
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def gguf_value(kind, value):
    if kind == STRING:
        return gguf_string(value)
    if kind == ARRAY:
        item_kind, items = value
        out = [struct.pack("<IQ", item_kind, len(items))]
        out.extend(gguf_value(item_kind, item) for item in items)
        return b"".join(out)
    return struct.pack({UINT32: "<I", INT32: "<i", FLOAT32: "<f", BOOL: "<?"}[kind], value)


def quantised(rng, tensor_type, rows, cols, std):
    """Random blocks of `tensor_type` whose values have mean 0 and roughly
    standard deviation `std`: random codes under one scale per tensor."""
    _, per_block, block_bytes = tensor_type
    blocks = rows * cols // per_block
    data = bytearray(rng.randbytes(blocks * block_bytes))
    if tensor_type == Q4_1:
        d = std / math.sqrt((16 * 16 - 1) / 12)  # codes 0..15 uniform
        header = struct.pack("<ee", d, -7.5 * d)
    else:
        d = std / math.sqrt((256 * 256 - 1) / 12)  # codes -128..127 uniform
        header = struct.pack("<e", d)
    for i, byte in enumerate(header):
        data[i::block_bytes] = bytes([byte]) * blocks
    return data


def main():
    parser = argparse.ArgumentParser(
        description="Write a random-weight GGUF model of SmolLM2-135M's shape and storage."
    )
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    parser.add_argument("--layers", type=int, default=LAYERS,
                        help=f"layers (default {LAYERS}, SmolLM2-135M's; fewer for quick tests)")
    parser.add_argument("--seed", type=int, default=135, help="seed of the weights (default 135)")
    args = parser.parse_args()
    if not 1 <= args.layers <= 1024:
        parser.error("--layers must be between 1 and 1024")

    rng = random.Random(args.seed)
    tokens = SPECIALS + byte_symbols()
    tokens += [f"<|random_{i}|>" for i in range(VOCAB - len(tokens))]
    types = [CONTROL] * len(SPECIALS) + [NORMAL] * (VOCAB - len(SPECIALS))

    metadata = [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, "kvscope random weights, SmolLM2-135M shape"),
        ("general.file_type", UINT32, 3),  # mostly q4_1, as the real file
        ("general.alignment", UINT32, ALIGNMENT),
        ("llama.block_count", UINT32, args.layers),
        ("llama.context_length", UINT32, CONTEXT),
        ("llama.embedding_length", UINT32, HIDDEN),
        ("llama.feed_forward_length", UINT32, FFN),
        ("llama.attention.head_count", UINT32, HEADS),
        ("llama.attention.head_count_kv", UINT32, KV_HEADS),
        ("llama.rope.freq_base", FLOAT32, 100000.0),
        ("llama.attention.layer_norm_rms_epsilon", FLOAT32, 1e-5),
        ("llama.rope.dimension_count", UINT32, HEAD_DIM),
        ("llama.vocab_size", UINT32, VOCAB),
        ("tokenizer.ggml.model", STRING, "gpt2"),
        ("tokenizer.ggml.pre", STRING, "smollm"),
        ("tokenizer.ggml.add_bos_token", BOOL, False),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.token_type", ARRAY, (INT32, types)),
        ("tokenizer.ggml.merges", ARRAY, (STRING, [])),
        ("tokenizer.ggml.bos_token_id", UINT32, 1),
        ("tokenizer.ggml.eos_token_id", UINT32, 2),
        ("tokenizer.ggml.unknown_token_id", UINT32, 0),
    ]

    # (name, type, dims innermost first as GGUF stores them, weight std)
    tensors = [("token_embd.weight", Q8_0, (HIDDEN, VOCAB), 0.05)]
    for layer in range(args.layers):
        p = f"blk.{layer}."
        tensors += [
            (p + "attn_norm.weight", F32, (HIDDEN,), None),
            (p + "attn_q.weight", Q4_1, (HIDDEN, HEADS * HEAD_DIM), 1 / math.sqrt(HIDDEN)),
            (p + "attn_k.weight", Q4_1, (HIDDEN, KV_HEADS * HEAD_DIM), 1 / math.sqrt(HIDDEN)),
            (p + "attn_v.weight", Q4_1, (HIDDEN, KV_HEADS * HEAD_DIM), 1 / math.sqrt(HIDDEN)),
            (p + "attn_output.weight", Q4_1, (HEADS * HEAD_DIM, HIDDEN), 1 / math.sqrt(HIDDEN)),
            (p + "ffn_norm.weight", F32, (HIDDEN,), None),
            (p + "ffn_gate.weight", Q4_1, (HIDDEN, FFN), 1 / math.sqrt(HIDDEN)),
            (p + "ffn_up.weight", Q4_1, (HIDDEN, FFN), 1 / math.sqrt(HIDDEN)),
            (p + "ffn_down.weight", Q4_1, (FFN, HIDDEN), 1 / math.sqrt(FFN)),
        ]
    tensors.append(("output_norm.weight", F32, (HIDDEN,), None))

    def padding(size):
        return -size % ALIGNMENT

    infos, offset = [], 0
    for name, tensor_type, dims, _ in tensors:
        values = math.prod(dims)
        size = values // tensor_type[1] * tensor_type[2]
        infos.append(gguf_string(name) + struct.pack("<I", len(dims))
                     + b"".join(struct.pack("<Q", d) for d in dims)
                     + struct.pack("<IQ", tensor_type[0], offset))
        offset += size + padding(size)

    header = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(metadata))]
    header += [gguf_string(key) + struct.pack("<I", kind) + gguf_value(kind, value)
               for key, kind, value in metadata]
    header += infos
    header = b"".join(header)

    partial = args.out.with_name(args.out.name + ".partial")
    with open(partial, "wb") as out:
        out.write(header + bytes(padding(len(header))))
        for name, tensor_type, dims, std in tensors:
            if tensor_type == F32:
                data = struct.pack(f"<{dims[0]}f", *([1.0] * dims[0]))
            else:
                data = quantised(rng, tensor_type, dims[1], dims[0], std)
            out.write(data + bytes(padding(len(data))))
    partial.replace(args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, {args.layers} layers, "
          f"random weights of SmolLM2-135M's shape)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
