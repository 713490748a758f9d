#!/usr/bin/env python3
"""kvscope against llama.cpp, side by side in one run, on the same GGUF file
and machine: prefill and decode throughput for each batch size and context
length, then the ratios.

For each case the two engines run back to back (kvscope first, then
llama.cpp, alternating on repeats) so both see the same machine state. Both
prefill the same number of random tokens per sequence, one sequence at a
time in chunks of 512, then decode all sequences together one token per
sequence per step, feeding back the argmax.

Needs llama-cpp-python (it builds llama.cpp from source for this CPU):
    python3 -m venv /tmp/llama && /tmp/llama/bin/pip install llama-cpp-python
    /tmp/llama/bin/python bench/compare_llama_cpp.py --kvscope build/default/app/cli/kvscope \\
        --out bench/results/cpu-$(date +%F).md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import llama_cpp as ll
import numpy as np


def machine_name() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical CPUs"


# kvscope's KV formats that llama.cpp also has, by ggml type id.
GGML_KV_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 8, "bf16": 30}


class LlamaCpp:
    """llama.cpp through its C API: one context holding every sequence."""

    def __init__(self, model_path: str, threads: int, cache_type: int):
        ll.llama_backend_init()
        params = ll.llama_model_default_params()
        self.model = ll.llama_model_load_from_file(model_path.encode(), params)
        if not self.model:
            raise SystemExit(f"llama.cpp could not load {model_path}")
        self.vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self.model))
        self.threads = threads
        self.cache_type = cache_type
        # An untimed run first: the first pass faults the memory-mapped
        # weights in (this process keeps them). kvscope bench warms each case
        # with an untimed prompt and decode step besides (for its GPU
        # backend's buffers and graphs); this side does not.
        self.run(1, 4, 1, 512, 0)

    def run(self, batch: int, context: int, steps: int, chunk: int, seed: int) -> dict:
        cparams = ll.llama_context_default_params()
        cparams.n_ctx = batch * (context + steps) + 256
        cparams.n_batch = max(chunk, batch)
        cparams.n_ubatch = max(chunk, batch)
        cparams.n_seq_max = batch
        cparams.n_threads = self.threads
        cparams.n_threads_batch = self.threads
        cparams.type_k = self.cache_type
        cparams.type_v = self.cache_type
        if hasattr(cparams, "kv_unified"):
            cparams.kv_unified = True  # one cache shared by all sequences, like kvscope's pool
        ctx = ll.llama_init_from_model(self.model, cparams)
        if not ctx:
            raise SystemExit("llama.cpp could not create a context")
        lb = ll.llama_batch_init(max(chunk, batch), 0, batch)
        rng = random.Random(seed)

        def decode(entries):  # entries: (token, position, sequence, want_logits)
            lb.n_tokens = len(entries)
            for i, (tok, pos, seq, logits) in enumerate(entries):
                lb.token[i] = tok
                lb.pos[i] = pos
                lb.n_seq_id[i] = 1
                lb.seq_id[i][0] = seq
                lb.logits[i] = logits
            if ll.llama_decode(ctx, lb) != 0:
                raise SystemExit("llama_decode failed")

        start = time.perf_counter()
        for s in range(batch):
            prompt = [rng.randrange(100, self.vocab) for _ in range(context)]
            for done in range(0, context, chunk):
                part = prompt[done:done + chunk]
                decode([(t, done + i, s, done + i == context - 1) for i, t in enumerate(part)])
        prefill = batch * context / (time.perf_counter() - start)

        nxt = [rng.randrange(100, self.vocab) for _ in range(batch)]
        start = time.perf_counter()
        for step in range(steps):
            decode([(nxt[s], context + step, s, True) for s in range(batch)])
            # numpy's argmax, so reading the result costs llama.cpp no more
            # than kvscope's C++ argmax costs it.
            logits = np.ctypeslib.as_array(ll.llama_get_logits(ctx), shape=(batch, self.vocab))
            nxt = [int(i) for i in logits.argmax(axis=1)]
        elapsed = time.perf_counter() - start
        ll.llama_batch_free(lb)
        ll.llama_free(ctx)
        return {"prefill_tokens_per_second": prefill,
                "decode_tokens_per_second": batch * steps / elapsed}


def run_kvscope(binary: str, model: str, batch: int, context: int, steps: int, chunk: int,
                threads: int, seed: int, cache_type: str) -> dict:
    command = [binary, "bench", "--json", "-m", model, "-b", str(batch), "-c", str(context),
               "--decode-steps", str(steps), "--prefill-chunk", str(chunk), "--seed", str(seed),
               "--cache-type-k", cache_type, "--cache-type-v", cache_type]
    if threads:
        command += ["-t", str(threads)]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(result.stdout)[0]


def write_table(lines: list[str], out: Path | None) -> None:
    """Prints the Markdown table and writes it to `out` where given."""
    table = "\n".join(lines) + "\n"
    print("\n" + table)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table)
        print(f"wrote {out}")


def main() -> None:
    default_model = os.environ.get("KVSCOPE_MODEL") or str(
        Path.home() / ".cache/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kvscope", default="build/default/app/cli/kvscope")
    parser.add_argument("--model", default=default_model)
    parser.add_argument("--batch", default="1,8,16,32")
    parser.add_argument("--context", default="128,1024")
    parser.add_argument("--decode-steps", type=int, default=32)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=1, help="median over this many runs")
    parser.add_argument("--cache-type", choices=sorted(GGML_KV_TYPES), default="f16",
                        help="KV-cache format of both engines (llama.cpp's default is f16)")
    parser.add_argument("--out", type=Path, help="also write the table (Markdown) here")
    args = parser.parse_args()

    llama = LlamaCpp(args.model, args.threads, GGML_KV_TYPES[args.cache_type])
    rows = []
    for context in map(int, args.context.split(",")):
        for batch in map(int, args.batch.split(",")):
            ours, theirs = [], []
            for r in range(args.repeats):
                order = [0, 1] if r % 2 == 0 else [1, 0]
                for which in order:
                    if which == 0:
                        ours.append(run_kvscope(args.kvscope, args.model, batch, context,
                                                args.decode_steps, 512, args.threads, r + 1,
                                                args.cache_type))
                    else:
                        theirs.append(llama.run(batch, context, args.decode_steps, 512, r + 1))
            med = lambda runs, key: statistics.median(run[key] for run in runs)
            row = {
                "batch": batch, "context": context,
                "kv_prefill": med(ours, "prefill_tokens_per_second"),
                "ll_prefill": med(theirs, "prefill_tokens_per_second"),
                "kv_decode": med(ours, "decode_tokens_per_second"),
                "ll_decode": med(theirs, "decode_tokens_per_second"),
            }
            rows.append(row)
            print(f"batch {batch:3d} context {context:5d}: prefill {row['kv_prefill']:8.1f} vs "
                  f"{row['ll_prefill']:8.1f}, decode {row['kv_decode']:8.1f} vs "
                  f"{row['ll_decode']:8.1f} tokens/s", flush=True)

    lines = [
        f"# kvscope vs llama.cpp, CPU, {date.today().isoformat()}",
        "",
        f"- Machine: {machine_name()}; {args.threads} threads for both engines",
        f"- Model: {Path(args.model).name} (the real weights)",
        f"- llama.cpp: llama-cpp-python {ll.__version__}, built from source on this machine",
        f"- Method: {args.decode_steps} decode steps per case; median of {args.repeats} "
        "run(s), engines alternating; prefill one sequence at a time in 512-token chunks",
        f"- KV cache: {args.cache_type} for K and V in both engines",
        "",
        "| batch | context | prefill tok/s kvscope | llama.cpp | ratio | decode tok/s kvscope "
        "| llama.cpp | ratio |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['batch']} | {r['context']} | {r['kv_prefill']:.1f} | {r['ll_prefill']:.1f} | "
            f"{r['kv_prefill'] / r['ll_prefill']:.2f} | {r['kv_decode']:.1f} | "
            f"{r['ll_decode']:.1f} | {r['kv_decode'] / r['ll_decode']:.2f} |")
    write_table(lines, args.out)


if __name__ == "__main__":
    main()
