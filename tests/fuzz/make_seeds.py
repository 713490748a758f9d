"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/).

Seeds are real inputs of each kind, small, so fuzzing starts from what the
readers see in use and mutates outward:

  gguf             the test models under tests/engine/data (made by their own
                   scripts there), and their headers cut short
  dequantize       one to three blocks of every type kvscope converts
  tokenizer        text of many scripts, code, special-token text, invalid UTF-8
  workload_trace   kvscope workload lines (engine/workload/workload.h's format)
  hash_id_trace    the first lines of the Mooncake trace slice under
                   tests/engine/data, and Qwen-Bailian lines in its format
  recording_file   recordings of the tiny test model by `kvscope record`
                   (--kvscope PATH regenerates them; page size 512 keeps them small)
  recording_rows   edit scripts for fuzz_recording_rows (random bytes)
  kv_events        batches encoded by vLLM's and SGLang's own publisher code
                   (the classes scripts/fetch_publishers.py caches), run with
                   the cache's venv python; skipped without it
  trtllm_events    TensorRT-LLM's serializer's JSON shape
  prometheus_text  the /metrics pages under tests/profiler/data/metrics

  python3 tests/fuzz/make_seeds.py [--kvscope build/default/app/cli/kvscope]
  ~/.cache/kvscope/publishers/venv/bin/python tests/fuzz/make_seeds.py --only kv_events
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests/fuzz/corpus"


def target_dir(name: str) -> Path:
    out = CORPUS / name
    out.mkdir(parents=True, exist_ok=True)
    return out


def write(name: str, file: str, data: bytes | str) -> None:
    path = target_dir(name) / file
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def gguf() -> None:
    data = ROOT / "tests/engine/data"
    for model in ("tiny_llama.gguf", "reference_types.gguf"):
        raw = (data / model).read_bytes()
        write("gguf", model, raw)
        write("gguf", model.replace(".gguf", "-header.gguf"), raw[:2048])


# (type id, block bytes) of the types engine/gguf/dequantize.cpp converts.
DEQUANTIZABLE = {0: 4, 1: 2, 2: 18, 3: 20, 6: 22, 7: 24, 8: 34, 12: 144, 13: 176, 14: 210,
                 30: 2}


def dequantize(rng: random.Random) -> None:
    ids = sorted(DEQUANTIZABLE)
    for index, type_id in enumerate(ids):
        blocks = 1 + index % 3
        body = bytes(rng.randrange(256) for _ in range(blocks * DEQUANTIZABLE[type_id]))
        # The fuzzer picks types by the first byte modulo the count it finds.
        write("dequantize", f"type{type_id}", bytes([index]) + body)


def tokenizer() -> None:
    texts = {
        "english": "The quick brown fox jumps over the lazy dog. It's 3:45pm, isn't it?",
        "code": "def f(x):\n    return {'k': [x ** 2 for x in range(10)]}  # comment\n\t\t",
        "chat": "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n",
        "specials": "<|endoftext|><repo_name>kvscope<file_sep><|im_end|><|im_start|>",
        "cjk": "键值缓存把注意力的键和值存起来。日本語のテキスト、한국어 텍스트",
        "emoji": "cache hit 🎯🔥 👩‍👩‍👧‍👦 flags 🇫🇷🇯🇵 and é vs é",
        "whitespace": "  leading\u00a0nbsp\u2003em space\r\n\r\n\n\n   trailing   ",
        "numbers": "1234567890 3.14159 -0.5e-10 0xFF 1,000,000",
        "mixed": "Ünïcödé Ελληνικά Русский עברית العربية हिन्दी",
    }
    for name, text in texts.items():
        write("tokenizer", name, text)
    write("tokenizer", "invalid_utf8", b"ok \xff\xfe bad \xc3 cut \xe2\x82 \xed\xa0\x80 surrogate")
    write("tokenizer", "nul_and_controls", b"a\x00b\x01c\x1bd\x7f")


def workload_trace() -> None:
    lines = [
        {"arrival": 0, "prompt": "What is a KV cache?", "max_tokens": 16},
        {"arrival": 0.5, "prompt": "Hi", "chat": True, "system": "Be brief.",
         "history": ["Hello", "Hi there"], "max_tokens": 8, "temperature": 0.7,
         "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repetition_penalty": 1.1, "seed": 3},
        {"arrival": 1.25, "prompt_ids": [1, 2, 3, 4, 5, 6, 7, 8], "max_tokens": 4},
    ]
    text = "# a comment line\n\n" + "\n".join(json.dumps(line) for line in lines) + "\n"
    write("workload_trace", "mixed.jsonl", text)
    write("workload_trace", "ids_only.jsonl",
          "\n".join(json.dumps({"arrival": i * 0.1, "prompt_ids": list(range(i, i + 20)),
                                "max_tokens": 2}) for i in range(5)) + "\n")


def hash_id_trace() -> None:
    mooncake = (ROOT / "tests/engine/data/mooncake_conversation_head300.jsonl").read_text()
    head = "".join(mooncake.splitlines(keepends=True)[:12])
    # The first byte picks the reader: 0 automatic, 1 mooncake, 2 qwen-bailian.
    write("hash_id_trace", "mooncake_auto", b"\x00" + head.encode())
    write("hash_id_trace", "mooncake", b"\x01" + head.encode())
    qwen = [
        {"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.0, "input_length": 40,
         "output_length": 12, "type": "text", "turn": 1, "hash_ids": [11, 12, 13]},
        {"chat_id": 2, "parent_chat_id": 1, "timestamp": 1.5, "input_length": 70,
         "output_length": 30, "type": "text", "turn": 2, "hash_ids": [11, 12, 13, 14, 15]},
        {"chat_id": 3, "parent_chat_id": -1, "timestamp": 1.25, "input_length": 16,
         "output_length": 1, "type": "image", "turn": 1, "hash_ids": [99]},
    ]
    text = "\n".join(json.dumps(line) for line in qwen) + "\n"
    write("hash_id_trace", "qwen_bailian", b"\x02" + text.encode())
    write("hash_id_trace", "qwen_bailian_auto", b"\x00" + text.encode())


RECORDING_WORKLOAD = [
    {"arrival": 0, "prompt": "The cache keeps blocks of keys and values. Question one?",
     "max_tokens": 6},
    {"arrival": 0.01, "prompt": "The cache keeps blocks of keys and values. Question two, longer?",
     "max_tokens": 5, "temperature": 0.7, "seed": 3},
    {"arrival": 0.02, "prompt_ids": list(range(1, 21)), "max_tokens": 4},
    {"arrival": 0.03, "prompt": "Hi", "chat": True, "system": "Be brief.", "max_tokens": 3},
]


def recording_file(kvscope: str | None) -> None:
    if kvscope is None:
        return
    model = ROOT / "tests/engine/data/tiny_llama.gguf"
    runs = {
        "prefix_cache.sqlite": ["--num-gpu-blocks-override", "12"],
        "offload_tier.sqlite": ["--num-gpu-blocks-override", "10", "--offload-tier", "memory",
                                "--offload-blocks", "6"],
        "speculative_quantized.sqlite": ["--num-gpu-blocks-override", "6", "--speculative",
                                         "ngram:2", "--cache-type-k", "q8_0",
                                         "--cache-type-v", "q4_0"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        workload = Path(tmp) / "workload.jsonl"
        workload.write_text("\n".join(json.dumps(line) for line in RECORDING_WORKLOAD) + "\n")
        for name, options in runs.items():
            out = Path(tmp) / name
            subprocess.run([kvscope, "record", "-m", str(model), "-w", str(workload),
                            "--block-size", "4", "--backend", "cpu", "-o", str(out), *options],
                           check=True, stdout=subprocess.DEVNULL)
            db = sqlite3.connect(out)
            db.execute("PRAGMA page_size = 512")
            db.execute("VACUUM")
            db.close()
            shutil.copy(out, target_dir("recording_file") / name)


def recording_rows(rng: random.Random) -> None:
    for i in range(6):
        write("recording_rows", f"edits{i}", bytes(rng.randrange(256) for _ in range(48 + 16 * i)))


def kv_events(rng: random.Random) -> None:
    sys.path.insert(0, str(ROOT / "tests/profiler/publishers"))
    try:
        import msgspec  # noqa: F401  (the cache's venv has it)
        import drive_publisher as driver
    except ImportError as error:
        print(f"kv_events: skipped ({error}); run with the publishers' venv python",
              file=sys.stderr)
        return
    cache = Path(os.environ.get("KVSCOPE_PUBLISHERS",
                                Path.home() / ".cache/kvscope/publishers"))
    sources = {
        "vllm-0.23.0": ("vllm", "vllm/distributed/kv_events.py"),
        "vllm-0.33.0": ("vllm", "vllm/distributed/kv_events.py"),
        "sglang-0.5.19": ("sglang", "sglang/srt/disaggregation/kv_events.py"),
        "sglang-0.5.23": ("sglang", "sglang/srt/disaggregation/kv_events.py"),
    }
    for release, (engine, file) in sources.items():
        path = cache / release / file
        if not path.exists():
            print(f"kv_events: {path} missing (scripts/setup.sh fetches it)", file=sys.stderr)
            continue
        # Each release loads afresh, with fresh stubs (pydantic's among them).
        for name in [n for n in sys.modules if n.startswith(("vllm", "sglang"))
                     or (n.startswith("pydantic") and sys.modules[n].__spec__ is None)]:
            del sys.modules[name]
        module = driver.load_publisher_module(path, engine)
        encoder = msgspec.msgpack.Encoder()
        for form in ("uint64", "int64", "bytes"):
            workload = driver.Workload(module, rng, form, 16, [None, "GPU", "CPU"])
            payloads = []
            for seq in range(4):
                events = workload.batch(allow_clear=seq == 2)
                # The rank is positional: vLLM names it data_parallel_rank,
                # SGLang attn_dp_rank.
                batch = module.KVEventBatch(1_700_000_000.0 + seq * 0.125, events,
                                            seq % 2 or None)
                payloads.append(encoder.encode(batch))
            # The fuzzer's first byte: 0 one payload, 1 payloads split by
            # 0xC1, 2 the frames of a message (topic, sequence, payload).
            write("kv_events", f"{release}-{form}-payload", b"\x00" + payloads[0])
            write("kv_events", f"{release}-{form}-stream", b"\x01" + b"\xc1".join(payloads))
            frames = [b"kv-events", (7).to_bytes(8, "big"), payloads[1]]
            write("kv_events", f"{release}-{form}-message", b"\x02" + b"\xc1".join(frames))


def trtllm_events() -> None:
    def token(t: int) -> dict:
        return {"type": "unique_token", "token_id": t, "token_extra_id": 0}

    events = [
        {"event_id": 0, "data": {"type": "created", "num_blocks_per_cache_level": [512, 2048]},
         "window_size": 4096},
        {"event_id": 1, "data": {"type": "stored", "parent_hash": None, "blocks": [
            {"type": "stored_block", "block_hash": 177, "tokens": [token(10), token(11)],
             "cache_level": 0, "priority": 35},
            {"type": "stored_block", "block_hash": 178, "tokens": [token(12), token(13)],
             "cache_level": 0, "priority": 35}]}, "window_size": 4096},
        {"event_id": 2, "data": {"type": "stored", "parent_hash": 177, "blocks": [
            {"type": "stored_block", "block_hash": 193, "tokens": [token(20), token(21)],
             "cache_level": 0, "priority": 35}]}, "window_size": 4096, "attention_dp_rank": 0},
        {"event_id": 3, "data": {"type": "updated", "block_hash": 178,
                                 "cache_level": {"type": "event_diff", "new_value": 1,
                                                 "old_value": 0}, "priority": None},
         "window_size": 4096},
        {"event_id": 4, "data": {"type": "updated", "block_hash": 177, "cache_level": None,
                                 "priority": {"type": "event_diff", "new_value": 80,
                                              "old_value": 35}}, "window_size": 4096},
        {"event_id": 5, "data": {"type": "removed", "block_hashes": [193]}, "window_size": 4096},
    ]
    write("trtllm_events", "serializer.json", json.dumps(events, indent=1))
    write("trtllm_events", "big_hashes.json", json.dumps([
        {"event_id": 9, "data": {"type": "stored", "parent_hash": -(1 << 63), "blocks": [
            {"type": "stored_block", "block_hash": (1 << 63) - 1, "tokens": [token(1)],
             "cache_level": 1, "priority": 0}]}}]))


def prometheus_text() -> None:
    for page in sorted((ROOT / "tests/profiler/data/metrics").glob("*.prom")):
        write("prometheus_text", page.name, page.read_bytes())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kvscope", help="the kvscope command, to record the recording seeds")
    parser.add_argument("--only", help="one target's seeds")
    args = parser.parse_args()
    # A generator per target, so one target's seeds come out the same made
    # alone (--only) or with the rest.
    def rng(name: str) -> random.Random:
        return random.Random(f"kvscope-fuzz-seeds-{name}")

    makers = {
        "gguf": gguf,
        "dequantize": lambda: dequantize(rng("dequantize")),
        "tokenizer": tokenizer,
        "workload_trace": workload_trace,
        "hash_id_trace": hash_id_trace,
        "recording_file": lambda: recording_file(args.kvscope),
        "recording_rows": lambda: recording_rows(rng("recording_rows")),
        "kv_events": lambda: kv_events(rng("kv_events")),
        "trtllm_events": trtllm_events,
        "prometheus_text": prometheus_text,
    }
    for name, make in makers.items():
        if args.only in (None, name):
            make()
    return 0


if __name__ == "__main__":
    sys.exit(main())
