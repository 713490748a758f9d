#!/usr/bin/env python3
"""Golden data for kvscope's engine tests, from references nobody on the
project wrote: llama.cpp (llama-cpp-python) and Hugging Face transformers, both
loading the same GGUF that kvscope runs: SmolLM2-135M-Instruct Q4_1
(--profile smollm2) or Gemma 3 270M Q4_K_M (--profile gemma3).

Writes tests/engine/data/golden_smollm2.json (golden_gemma3.json):
  tokenizer   token ids for a test set (ASCII, Unicode, code, whitespace runs,
              digits, special tokens), from llama.cpp's tokenizer, which knows
              the file's "smollm" pre-tokenizer; transformers' ids are checked
              to agree where its GGUF conversion can
  teacher     a 256+ token text scored teacher-forced by transformers in fp32
              (weights dequantised from the GGUF): per position the top-20
              logits and the log-sum-exp of the whole distribution
  greedy      64 greedy tokens for a few chat prompts, from transformers fp32
              (llama.cpp's continuation is stored beside it for comparison)

Gemma 3 270M is a base model: its greedy prompts are plain text, its texts
start with BOS as the file asks, its teacher text runs past 512 tokens (the
sliding window of five layers in six), and its tokenizer has a golden file of
its own (make_gemma3_tokenizer_golden.py).

Run once by hand (not in CI; needs network for pip):
    python3 -m venv /tmp/ref
    /tmp/ref/bin/pip install torch transformers accelerate gguf llama-cpp-python
    /tmp/ref/bin/python scripts/reference/make_golden.py [--profile gemma3] [--model PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "engine" / "data"
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

# More of the same, so that Gemma's teacher text passes its 512-token window.
TEACHER_TEXT_MORE = (
    "\n\nSome models make the cache smaller by design. Grouped-query attention lets several "
    "query heads share one key head and one value head, which divides the cache by the size "
    "of the group. Multi-query attention takes this to its end with a single key and value "
    "head for all queries. Other models let most layers look only at a window of recent "
    "tokens, a few hundred wide, and keep the whole history only in every sixth layer or "
    "so; the blocks that fall out of a window can be freed while the request still runs, "
    "so a long conversation costs far less memory than it would in a model that keeps "
    "everything everywhere.\n\n"
    "Each of these choices changes what a profiler should show. A sliding window means "
    "that the number of live blocks per layer stops growing once the window is full, while "
    "the global layers keep growing; a chart of occupancy that lumps all layers together "
    "hides this. Prefix caching also changes meaning: a shared prefix helps a windowed "
    "layer only if the blocks at the end of the prefix are still held, since those are "
    "the ones the next token will read. A good tool separates the groups, counts hits per "
    "group, and lets the reader see at a glance which part of the memory is growing and "
    "which has reached its limit.\n\n"
    "None of this matters without honest numbers. Before trusting a new cache layout, run "
    "the same text through the old and the new one, compare the probabilities the model "
    "assigns to each next token, and look at the worst positions as well as the average. "
    "Small differences in rounding are expected; a systematic shift, or a sudden jump once "
    "the text grows past a window, points to a real mistake in the implementation."
)

# Prompts whose answers run past 64 tokens, so the whole greedy window is the
# model's answer rather than what it babbles after its end-of-turn token.
CHAT_PROMPTS = [
    "What is a KV cache?",
    "Explain how a hash table works.",
    "Write a short story about a robot who learns to paint.",
]


# Gemma 3 270M is a base model: plain text to continue, not chat turns.
BASE_PROMPTS = [
    "The key-value cache of a transformer",
    "def fibonacci(n):\n",
    "Once upon a time, in a small village by the sea,",
]

PROFILES = {
    "smollm2": {"model": "SmolLM2-135M-Instruct.Q4_1.gguf", "out": "golden_smollm2.json",
                "chat": True, "tokenizer": True, "teacher": TEACHER_TEXT, "min_teacher": 256},
    "gemma3": {"model": "gemma-3-270m-q4_k_m.gguf", "out": "golden_gemma3.json",
               "chat": False, "tokenizer": False, "teacher": TEACHER_TEXT + TEACHER_TEXT_MORE,
               "min_teacher": 600},
}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", choices=sorted(PROFILES), default="smollm2")
    parser.add_argument("--model", type=Path, help="default: the cached file of the profile")
    args = parser.parse_args()
    profile = PROFILES[args.profile]
    cache = Path.home() / ".cache" / "kvscope" / "models"
    model_path: Path = args.model or (Path(os.environ["KVSCOPE_MODEL"])
                                      if args.profile == "smollm2" and "KVSCOPE_MODEL" in os.environ
                                      else cache / profile["model"])
    out = DATA / profile["out"]

    import llama_cpp
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM, AutoTokenizer
    import transformers

    llm = Llama(str(model_path), verbose=False, logits_all=True, n_ctx=2048, n_threads=2)
    # eager: the plain softmax(QK^T)V, sliding-window mask included.
    hf_tok = AutoTokenizer.from_pretrained(model_path.parent, gguf_file=model_path.name)
    hf = AutoModelForCausalLM.from_pretrained(model_path.parent, gguf_file=model_path.name,
                                              dtype=torch.float32, attn_implementation="eager")
    hf.eval()

    tokenizer = []
    for text in TOKENIZER_CASES if profile["tokenizer"] else []:
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

    # add_bos: BOS where the file asks for it (Gemma), as kvscope's
    # encode_sequence does; SmolLM2's file does not.
    teacher_text = profile["teacher"]
    teacher_ids = llm.tokenize(teacher_text.encode("utf-8"), add_bos=True, special=False)
    assert len(teacher_ids) >= profile["min_teacher"], len(teacher_ids)
    with torch.no_grad():
        logits = hf(torch.tensor([teacher_ids])).logits[0].float()
    lse = torch.logsumexp(logits, dim=-1)
    top = torch.topk(logits, TOP_K, dim=-1)
    teacher = {
        "text": teacher_text,
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
    for prompt in CHAT_PROMPTS if profile["chat"] else BASE_PROMPTS:
        if profile["chat"]:
            # The chat template stored in the GGUF, rendered by transformers (Jinja).
            prompt_text = hf_tok.apply_chat_template([{"role": "user", "content": prompt}],
                                                     add_generation_prompt=True, tokenize=False)
        else:
            prompt_text = prompt
        prompt_ids = llm.tokenize(prompt_text.encode("utf-8"), add_bos=not profile["chat"],
                                  special=True)
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
    out.write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
