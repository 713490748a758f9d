#!/usr/bin/env python3
"""Quality sweep of KV formats and eviction policies with `kvscope eval`:
every row scores the same text teacher-forced against a full f32 cache and
prints KL divergence (mean, p99), top-1 agreement, perplexity change and
bytes per cached token. Writes a Markdown table.

    python3 bench/eval_sweep.py --kvscope build/default/app/cli/kvscope \\
        --max-tokens 1024 --out docs/kv-eval-sweep.md
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from datetime import date
from pathlib import Path

FORMATS = [("f32", "f32"), ("f16", "f16"), ("bf16", "bf16"), ("fp8", "fp8"), ("q8_0", "q8_0"),
           ("q8_0", "q4_0"), ("q4_1", "q4_1"), ("q4_0", "q4_0"), ("kivi4", "kivi4"),
           ("kivi2", "kivi2")]
POLICIES = ["window", "streaming", "h2o", "snapkv"]


def run(binary: str, args: list[str]) -> dict:
    command = [binary, "eval", "--json", *args]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kvscope", default="build/default/app/cli/kvscope")
    parser.add_argument("--text", default="all")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--budgets", default="256,512")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    common = ["--text", args.text, "-n", str(args.max_tokens), "--prompt-tokens",
              str(args.prompt_tokens)]
    rows = []
    for k, v in FORMATS:
        r = run(args.kvscope, common + ["--cache-type-k", k, "--cache-type-v", v])
        rows.append(r)
        print(f"{k}/{v}: KL {r['kl_mean']:.3g}", file=sys.stderr, flush=True)
    for budget in map(int, args.budgets.split(",")):
        for policy in POLICIES:
            r = run(args.kvscope, common + ["--eviction", policy, "--kv-budget", str(budget)])
            rows.append(r)
            print(f"{policy}/{budget}: KL {r['kl_mean']:.3g}", file=sys.stderr, flush=True)

    lines = [
        f"# KV formats and eviction: quality sweep, {date.today().isoformat()}",
        "",
        f"- `kvscope eval` on the evaluation text(s) `{args.text}`, first {args.max_tokens} "
        f"tokens each; {args.prompt_tokens}-token prompt, then teacher-forced chunks of 32",
        "- Model: SmolLM2-135M-Instruct Q4_1 (the real weights), CPU backend",
        f"- Machine: {platform.machine()} {platform.system()}; made by `bench/eval_sweep.py`",
        "- Reference: the same run with an f32 cache and no eviction. Eviction rows store f16.",
        "- bytes/token: what one cached token costs (K and V, all layers); eviction also caps",
        "  the tokens held per sequence at the budget (SnapKV: the prompt only)",
        "",
        "| K | V | eviction | budget | KL mean | KL p99 | top-1 | ppl | ppl delta | bytes/token |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        budget = r["kv_budget"] or "-"
        lines.append(
            f"| {r['cache_type_k']} | {r['cache_type_v']} | {r['eviction']} | {budget} | "
            f"{r['kl_mean']:.3g} | {r['kl_p99']:.3g} | {r['top1_agreement']:.4f} | "
            f"{r['ppl']:.3f} | {r['ppl_delta']:+.3f} | {r['bytes_per_token']:.0f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        args.out.write_text(table)


if __name__ == "__main__":
    main()
