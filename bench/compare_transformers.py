#!/usr/bin/env python3
"""Decode speed of kvscope's CUDA backend beside Hugging Face transformers on
the same GPU and model shape, in one run (machines are noisy: ratios are only
meaningful side by side).

transformers runs SmolLM2-135M's architecture (LlamaForCausalLM with its
config) with random weights in bf16: decode time does not depend on the
values, and no download is needed on an offline GPU machine. Two modes:
eager with the dynamic cache, and a static cache compiled by torch.compile
("reduce-overhead", CUDA graphs). kvscope's figures come from
kvscope-bench-cuda (the real GGUF or a same-shape model: it prints which).

For each batch and context the sequences are first filled with `context`
tokens, then `--steps` single-token decode steps are timed; the table prints
milliseconds per step and tokens per second.

    python3 bench/compare_transformers.py --kvscope-bench build/bench/kvscope-bench-cuda \\
        [--batches 1,32,128] [--contexts 1024,4096] [--steps 20]
"""

import argparse
import re
import subprocess
import sys
import time

SMOLLM2_135M = dict(
    vocab_size=49152,
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    max_position_embeddings=8192,
    rope_theta=100000.0,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
)


def parse_list(text):
    return [int(x) for x in text.split(",") if x]


def transformers_decode_ms(torch, model, batch, context, steps, compiled):
    """Best milliseconds per decode step after filling `context` tokens."""
    from transformers import StaticCache

    device = "cuda"
    prompt = torch.randint(100, SMOLLM2_135M["vocab_size"], (batch, context), device=device)
    with torch.inference_mode():
        if compiled:
            cache = StaticCache(config=model.config, max_batch_size=batch,
                                max_cache_len=context + steps + 8, device=device,
                                dtype=torch.bfloat16)
        else:
            cache = None
        out = model(prompt, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        token = out.logits[:, -1:].argmax(-1)
        position = context
        best = float("inf")
        step = model.forward
        if compiled:
            step = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        for i in range(steps + 3):  # three warm-ups (compilation, graph capture)
            cache_position = torch.tensor([position], device=device)
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = step(token, past_key_values=cache, use_cache=True, cache_position=cache_position)
            token = out.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            elapsed = (time.perf_counter() - start) * 1e3
            if not compiled:
                cache = out.past_key_values
            position += 1
            if i >= 3:
                best = min(best, elapsed)
        return best


def reference_attention_ms(torch, batch, context, dtype):
    """torch's scaled_dot_product_attention (its flash backend where it takes
    the call) over the same K/V bytes kvscope's decode attention reads: SmolLM2's
    3 KV heads of 64, contiguous, each KV head's 3 query heads asked as 3 query
    rows (a decode needs no causal mask, so this is grouped-query attention
    without copying K/V per query head). Median of 50 CUDA-event timings."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    kv_heads, group, head_dim = 3, 3, 64
    q = torch.randn(batch, kv_heads, group, head_dim, device="cuda", dtype=dtype)
    k = torch.randn(batch, kv_heads, context, head_dim, device="cuda", dtype=dtype)
    v = torch.randn(batch, kv_heads, context, head_dim, device="cuda", dtype=dtype)
    backend = "flash"
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v)
        chosen = [SDPBackend.FLASH_ATTENTION]
    except RuntimeError:
        backend = "default"
        chosen = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    times = []
    with sdpa_kernel(chosen):
        for i in range(60):
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            F.scaled_dot_product_attention(q, k, v)
            end.record()
            end.synchronize()
            if i >= 10:
                times.append(begin.elapsed_time(end))
    times.sort()
    bytes_read = 2 * k.numel() * k.element_size()
    ms = times[len(times) // 2]
    return ms, bytes_read / (ms * 1e-3), backend


def kvscope_rows(binary, batches, contexts, steps, model):
    command = [binary, "--batches", ",".join(map(str, batches)),
               "--contexts", ",".join(map(str, contexts)), "--steps", str(steps)]
    if model:
        command += ["--model", model]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    sys.stdout.write(result.stdout)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"kvscope-bench-cuda failed ({result.returncode})")
    rows = {}
    for line in result.stdout.splitlines():
        match = re.match(r"\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|", line)
        if match:
            rows[(int(match[1]), int(match[2]))] = float(match[3])
        match = re.match(r"decode attention, batch 32 x 4096, one layer: ([\d.]+) ms", line)
        if match:
            rows["attention"] = float(match[1])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kvscope-bench", required=True, help="path to kvscope-bench-cuda")
    parser.add_argument("--model", help="GGUF for kvscope (default: its own default)")
    parser.add_argument("--batches", type=parse_list, default=[1, 32, 128])
    parser.add_argument("--contexts", type=parse_list, default=[1024, 4096])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reference-only", action="store_true",
                        help="kvscope's rows and the reference attention, no transformers models")
    args = parser.parse_args()

    import torch
    if not torch.cuda.is_available():
        print("no GPU: nothing to compare")
        return 0
    from transformers import LlamaConfig, LlamaForCausalLM

    ours = kvscope_rows(args.kvscope_bench, args.batches, args.contexts, args.steps, args.model)
    torch.manual_seed(0)
    ref_ms, ref_bandwidth, ref_backend = reference_attention_ms(torch, 32, 4096, torch.float16)
    mine = ours.get("attention", float("nan"))
    print(f"\nreference decode attention (torch scaled_dot_product_attention, {ref_backend} "
          f"backend, f16, contiguous K/V), batch 32 x 4096, one layer: {ref_ms:.3f} ms, "
          f"{ref_bandwidth / 1e9:.0f} GB/s; kvscope's paged attention on the same shape: "
          f"{mine:.3f} ms ({mine / ref_ms:.2f}x the reference's time)", flush=True)
    if args.reference_only:
        return 0
    model = LlamaForCausalLM(LlamaConfig(**SMOLLM2_135M)).to("cuda", torch.bfloat16).eval()
    print(f"\ndevice: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    print("| batch | context | kvscope ms | transformers eager ms | transformers static+compile ms |"
          " vs eager | vs compiled |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for context in args.contexts:
        for batch in args.batches:
            eager = transformers_decode_ms(torch, model, batch, context, args.steps, False)
            compiled = transformers_decode_ms(torch, model, batch, context, args.steps, True)
            mine = ours.get((batch, context), float("nan"))
            print(f"| {batch} | {context} | {mine:.3f} | {eager:.3f} | {compiled:.3f} | "
                  f"{eager / mine:.2f}x | {compiled / mine:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
