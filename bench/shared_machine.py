#!/usr/bin/env python3
"""kvscope and llama.cpp on a machine they share with other work: decode and
prefill throughput with the default thread count and with one thread, on an
idle machine and beside N busy processes (each spinning on a core), every
case side by side in one run on the same GGUF file.

Issue 42's targets: beside one busy process, the default thread count at
least as fast as one thread under the same load, and kvscope's slowdown no
worse than llama.cpp's.

Needs llama-cpp-python, as compare_llama_cpp.py (whose runners it uses):
    /tmp/llama/bin/python bench/shared_machine.py --kvscope build/default/app/cli/kvscope \\
        --busy 1 --out bench/results/cpu-$(date +%F)-shared-machine.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from contextlib import contextmanager
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_llama_cpp import (  # noqa: E402
    GGML_KV_TYPES, LlamaCpp, ll, machine_name, run_kvscope, write_table)


@contextmanager
def busy_processes(count: int):
    """`count` processes spinning on a core each (as `yes > /dev/null`)."""
    spin = [sys.executable, "-c", "while True: pass"]
    procs = [subprocess.Popen(spin) for _ in range(count)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def main() -> None:
    default_model = os.environ.get("KVSCOPE_MODEL") or str(
        Path.home() / ".cache/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kvscope", default="build/default/app/cli/kvscope")
    parser.add_argument("--model", default=default_model)
    parser.add_argument("--batch", default="1,8")
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--decode-steps", type=int, default=48)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="the default thread count (both engines')")
    parser.add_argument("--busy", type=int, default=1, help="busy processes beside the engines")
    parser.add_argument("--repeats", type=int, default=2, help="median over this many runs")
    parser.add_argument("--out", type=Path, help="also write the table (Markdown) here")
    args = parser.parse_args()

    llama = LlamaCpp(args.model, args.threads, GGML_KV_TYPES["f16"])
    thread_counts = [args.threads, 1] if args.threads > 1 else [1]

    def measure(engine: str, threads: int, batch: int, seed: int) -> dict:
        if engine == "kvscope":
            return run_kvscope(args.kvscope, args.model, batch, args.context, args.decode_steps,
                               512, threads, seed, "f16")
        llama.threads = threads
        return llama.run(batch, args.context, args.decode_steps, 512, seed)

    # results[(engine, threads, batch, busy)] = list of runs
    results: dict[tuple, list] = {}
    for batch in map(int, args.batch.split(",")):
        for busy in (0, args.busy):
            with busy_processes(busy):
                for r in range(args.repeats):
                    for engine in (["kvscope", "llama.cpp"] if r % 2 == 0
                                   else ["llama.cpp", "kvscope"]):
                        for threads in thread_counts:
                            run = measure(engine, threads, batch, r + 1)
                            results.setdefault((engine, threads, batch, busy), []).append(run)
                            print(f"batch {batch} busy {busy} {engine} {threads} thread(s): "
                                  f"decode {run['decode_tokens_per_second']:.1f} tok/s",
                                  flush=True)

    def med(key: tuple, field: str) -> float:
        return statistics.median(run[field] for run in results[key])

    lines = [
        f"# Sharing the machine: kvscope and llama.cpp, {date.today().isoformat()}",
        "",
        f"- Machine: {machine_name()}",
        f"- Model: {Path(args.model).name}; f16 KV cache; context {args.context}, "
        f"{args.decode_steps} decode steps",
        f"- llama.cpp: llama-cpp-python {ll.__version__}",
        f"- Busy: {args.busy} process(es) spinning beside the engine; median of {args.repeats} "
        "run(s), engines alternating",
        "",
        "| engine | threads | batch | decode tok/s idle | busy | busy/idle "
        "| prefill tok/s idle | busy |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    checks = []
    for batch in map(int, args.batch.split(",")):
        for engine in ("kvscope", "llama.cpp"):
            for threads in thread_counts:
                idle = (engine, threads, batch, 0)
                busy = (engine, threads, batch, args.busy)
                d_idle = med(idle, "decode_tokens_per_second")
                d_busy = med(busy, "decode_tokens_per_second")
                lines.append(
                    f"| {engine} | {threads} | {batch} | {d_idle:.1f} | {d_busy:.1f} | "
                    f"{d_busy / d_idle:.2f} | {med(idle, 'prefill_tokens_per_second'):.1f} | "
                    f"{med(busy, 'prefill_tokens_per_second'):.1f} |")
        if len(thread_counts) == 2:
            ours = med(("kvscope", args.threads, batch, args.busy), "decode_tokens_per_second")
            alone = med(("kvscope", 1, batch, args.busy), "decode_tokens_per_second")
            slow_ours = ours / med(("kvscope", args.threads, batch, 0), "decode_tokens_per_second")
            slow_theirs = (med(("llama.cpp", args.threads, batch, args.busy),
                               "decode_tokens_per_second") /
                           med(("llama.cpp", args.threads, batch, 0), "decode_tokens_per_second"))
            checks.append(f"| batch {batch}: {args.threads} threads busy vs 1 thread busy | "
                          f"{ours / alone:.2f} (target >= 1) |")
            checks.append(f"| batch {batch}: busy/idle, kvscope vs llama.cpp | "
                          f"{slow_ours:.2f} vs {slow_theirs:.2f} (target: kvscope's >= "
                          "llama.cpp's) |")
    lines += ["", "| check | result |", "| --- | --- |", *checks]
    write_table(lines, args.out)


if __name__ == "__main__":
    main()
