#!/usr/bin/env python3
"""Golden data for kvscope's engine tests, from references nobody on the
project wrote: llama.cpp (llama-cpp-python) and Hugging Face transformers, both
loading the same SmolLM2-135M-Instruct Q4_1 GGUF that kvscope runs.

Writes tests/engine/data/golden_smollm2.json:
  tokenizer   token ids for a test set (ASCII, Unicode, code, whitespace runs,
              digits, special tokens), from llama.cpp's tokenizer, which knows
              the file's "smollm" pre-tokenizer; transformers' ids are checked
              to agree where its GGUF conversion can
  teacher     a 256+ token text scored teacher-forced by transformers in fp32
              (weights dequantised from the GGUF): per position the top-20
              logits and the log-sum-exp of the whole distribution
  greedy      64 greedy tokens for a few chat prompts, from transformers fp32
              (llama.cpp's continuation is stored beside it for comparison)

Run once by hand (not in CI; needs network for pip):
    python3 -m venv /tmp/ref
    /tmp/ref/bin/pip install torch transformers accelerate gguf llama-cpp-python
    /tmp/ref/bin/python scripts/reference/make_golden.py [--model PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "engine" / "data" / "golden_smollm2.json"
TOP_K = 20
GREEDY_TOKENS = 64

TOKENIZER_CASES = [
    "Hello world",
    "Hello, world! How are you today?",
    " leading space",
    "trailing space ",
    "  multiple   spaces\n\n\ttabs\t\tand\r\nwindows newlines",
    "\n\n\n",
    "     ",
    "12345 apples and 3.14159 pies, 1,000,000 dollars",
    "2026-11-21T04:58:28Z",
    "I'm sure you've seen it; they'll say we'd done it. DON'T SHOUT",
    "def kv_cache(block_size=16):\n    return [0] * block_size  # comment\n",
    "for (int i = 0; i < n; ++i) { sum += x[i] * y[i]; }",
    "<html><body class=\"main\">&amp; &lt;tag&gt;</body></html>",
    "héllo κόσμε 你好世界 こんにちは 안녕하세요 Привет мир",
    "emoji: 🤖🚀 👩‍👩‍👧 ✓ ✗ ★",
    "naïve café résumé Ångström façade",
    "mixed123numbers456and789letters",
    "e=mc^2; ∑_{i=1}^{n} x_i ≈ ∫ f(x) dx",
    "URL: https://example.com/path?query=1&x=y#frag",
    "tab\tseparated\tvalues\n1\t2\t3",
    "ALLCAPS lowercase CamelCase snake_case kebab-case",
    "a",
    "",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n",
    "<|endoftext|>text after end",
    "not special: <|im_start without end",
    "\u00a0non-breaking\u2003em-space\u3000ideographic",
    "Zero\u200bwidth\u200djoiner",
]

TEACHER_TEXT = (
    "A language model writes one token at a time. Each new token must attend to every "
    "token before it, so the model keeps the keys and values of earlier tokens in a cache "
    "instead of computing them again. This key-value cache grows with the length of the "
    "conversation and with the number of conversations served at once, and on a busy "
    "server it, rather than the weights, decides how many requests fit in memory.\n\n"
    "Serving engines therefore manage the cache the way an operating system manages "
    "memory. They cut it into fixed-size blocks of sixteen tokens, keep a table that maps "
    "each sequence to its blocks, and hand blocks out as sequences grow. When two requests "
    "begin with the same system prompt, the blocks holding that prefix can be shared "
    "instead of copied: the second request skips the work of computing them and starts "
    "generating sooner. When memory runs out, the engine can pause a request, free its "
    "blocks and compute them again later, or it can keep fewer tokens per sequence, "
    "evicting those the model attends to least. Quantising the cached keys and values to "
    "eight or four bits is another way to fit more tokens, at some cost in accuracy.\n\n"
    "Measuring these trade-offs needs care. A cache hit saves time only if the saved "
    "prefill was the slow part; a smaller cache helps only if quality holds; and every "
    "number depends on the workload, so a fair comparison runs both settings on the same "
    "requests, on the same machine, one after the other, and reports how much they vary."
)

# Prompts whose answers run past 64 tokens, so the whole greedy window is the
# model's answer rather than what it babbles after its end-of-turn token.
CHAT_PROMPTS = [
    "What is a KV cache?",
    "Explain how a hash table works.",
    "Write a short story about a robot who learns to paint.",
]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def main() -> None:
    default_model = Path(os.environ.get("KVSCOPE_MODEL") or Path.home() / ".cache" / "kvscope" /
                         "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, default=default_model)
    args = parser.parse_args()
    model_path: Path = args.model

    import llama_cpp
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM, AutoTokenizer
    import transformers

    llm = Llama(str(model_path), verbose=False, logits_all=True, n_ctx=2048, n_threads=2)
    hf_tok = AutoTokenizer.from_pretrained(model_path.parent, gguf_file=model_path.name)
    hf = AutoModelForCausalLM.from_pretrained(model_path.parent, gguf_file=model_path.name,
                                              dtype=torch.float32)
    hf.eval()

    tokenizer = []
    for text in TOKENIZER_CASES:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        plain = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        hf_ids = hf_tok.encode(text, add_special_tokens=False)
        tokenizer.append({
            "text": text,
            "ids": ids,                   # special tokens parsed
            "ids_no_special": plain,      # special-token text taken literally
            "transformers_agrees": hf_ids == ids,
        })
        if hf_ids != ids:
            print(f"note: transformers differs on {text!r}: {hf_ids} vs llama.cpp {ids}")

    teacher_ids = llm.tokenize(TEACHER_TEXT.encode("utf-8"), add_bos=False, special=False)
    assert len(teacher_ids) >= 256, len(teacher_ids)
    with torch.no_grad():
        logits = hf(torch.tensor([teacher_ids])).logits[0].float()
    lse = torch.logsumexp(logits, dim=-1)
    top = torch.topk(logits, TOP_K, dim=-1)
    teacher = {
        "text": TEACHER_TEXT,
        "ids": teacher_ids,
        "top_k": TOP_K,
        "positions": [
            {"top_ids": top.indices[p].tolist(),
             "top_logits": [round(v, 5) for v in top.values[p].tolist()],
             "logsumexp": round(lse[p].item(), 5)}
            for p in range(len(teacher_ids))
        ],
    }

    greedy = []
    for prompt in CHAT_PROMPTS:
        # The chat template stored in the GGUF, rendered by transformers (Jinja).
        prompt_text = hf_tok.apply_chat_template([{"role": "user", "content": prompt}],
                                                 add_generation_prompt=True, tokenize=False)
        prompt_ids = llm.tokenize(prompt_text.encode("utf-8"), add_bos=False, special=True)
        # Greedy by full forward passes, one token at a time. transformers'
        # generate() takes its cached path, whose different rounding flips
        # near-ties within a few dozen tokens; the uncached argmax chain is
        # the fp32 reference a correct engine must follow.
        hf_tokens, margins = [], []
        ids = list(prompt_ids)
        with torch.no_grad():
            for _ in range(GREEDY_TOKENS):
                last = hf(torch.tensor([ids])).logits[0, -1].float()
                top2 = torch.topk(last, 2)
                hf_tokens.append(int(top2.indices[0]))
                margins.append(round(float(top2.values[0] - top2.values[1]), 5))
                ids.append(hf_tokens[-1])
        llm.reset()
        llama_tokens = []
        for token in llm.generate(prompt_ids, temp=0.0, top_k=1, reset=True):
            llama_tokens.append(token)
            if len(llama_tokens) == GREEDY_TOKENS:
                break
        greedy.append({
            "prompt": prompt,
            "prompt_text": prompt_text,
            "prompt_ids": prompt_ids,
            "tokens": hf_tokens,
            "top1_margins": margins,  # logit gap to the runner-up at each step
            "text": hf_tok.decode(hf_tokens),
            "llama_cpp_tokens": llama_tokens,
        })
        agree = next((i for i, (a, b) in enumerate(zip(hf_tokens, llama_tokens)) if a != b),
                     len(hf_tokens))
        print(f"{prompt!r}: transformers and llama.cpp agree on the first {agree} tokens")

    golden = {
        "model_file": model_path.name,
        "model_sha256": sha256(model_path),
        "generated_by": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "llama_cpp_python": llama_cpp.__version__,
        },
        "tokenizer": tokenizer,
        "teacher_forced": teacher,
        "greedy": greedy,
    }
    OUT.write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
