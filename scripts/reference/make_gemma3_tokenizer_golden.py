#!/usr/bin/env python3
"""Token ids of the Gemma 3 270M GGUF's SentencePiece vocabulary for the test
texts (scripts/reference/spm_reference.py), from Google's sentencepiece
loaded with a model rebuilt from the file's own tokenizer data.

Writes tests/engine/data/golden_gemma3_tokenizer.json, which tst_sentencepiece
checks kvscope's tokenizer against when the model is in the cache
(scripts/setup.sh fetches it).

Run by hand when it needs to change (not in CI):
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install gguf sentencepiece protobuf numpy
    /tmp/ref/bin/python scripts/reference/make_gemma3_tokenizer_golden.py [--model PATH]
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from gguf import GGUFReader
from spm_reference import TEST_TEXTS, encode, processor_from_vocabulary, write_golden

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "engine" / "data" / "golden_gemma3_tokenizer.json"
DEFAULT_MODEL = Path.home() / ".cache" / "kvscope" / "models" / "gemma-3-270m-q4_k_m.gguf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    args = parser.parse_args()
    reader = GGUFReader(str(args.model))
    fields = reader.fields
    pieces = fields["tokenizer.ggml.tokens"].contents()
    scores = fields["tokenizer.ggml.scores"].contents()
    types = fields["tokenizer.ggml.token_type"].contents()
    prefix = fields["tokenizer.ggml.add_space_prefix"].contents()
    reference = processor_from_vocabulary(pieces, scores, types, add_space_prefix=bool(prefix))
    digest = hashlib.sha256(args.model.read_bytes()).hexdigest()
    cases = [{"text": t, "ids": encode(reference, pieces, types, t)} for t in TEST_TEXTS]
    write_golden(
        OUT,
        {
            "source": "scripts/reference/make_gemma3_tokenizer_golden.py",
            "model": args.model.name,
            "model_sha256": digest,
        },
        cases,
    )
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
