"""Google's sentencepiece as the reference for SentencePiece vocabularies in
GGUF files (tokenizer.ggml.model "llama"): a processor rebuilt from what the
file holds (pieces, scores, token types, the leading-space flag), and the test
texts both golden files use.

User-defined pieces are cut out of the raw text first, as llama.cpp and
Hugging Face's tokenizers do, and sentencepiece encodes the stretches between.
That matters for Gemma, whose runs of spaces are user-defined pieces written
with plain spaces: sentencepiece alone would look for them only after spaces
became U+2581, and never find them. Imported by tests/engine/data/make_tiny_spm_gguf.py
and scripts/reference/make_gemma3_tokenizer_golden.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as model_pb2

# ASCII, Unicode (accents, CJK, emoji, combining marks), code, whitespace runs
# (spaces, tabs, newlines), digits, byte-fallback characters and the texts of
# special tokens written as plain text.
TEST_TEXTS = [
    "Hello world",
    "Hello, world! How are you today?",
    " leading space",
    "trailing space ",
    "  two leading spaces and  two  inside",
    "tabs\tand\ttabs\t\t",
    "line one\nline two\n\nline four\n\n\n\nline eight",
    "The year 2026, 3.14159 and 1,000,000 digits",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber \u00c5ngstr\u00f6m",
    "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3068\u4e2d\u6587\u53e5\u5b50",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "emoji \U0001f600\U0001f680 and flags \U0001f1eb\U0001f1f7",
    "e\u0301 combining and \u2603 snowman",
    "def attention(q, k, v):\n    return softmax(q @ k.T / sqrt(d)) @ v\n",
    "for (int i = 0; i < n; ++i) { sum += x[i] * y[i]; }",
    "<start_of_turn>user\nWhat is a KV cache?<end_of_turn>\n",
    "<bos> and <eos> as text",
    "\u0000\u0001 control bytes \u007f",
    "a",
    "",
    "     ",
    "\n",
    "ALL CAPS SHOUTING",
    "https://example.org/path?query=1&b=2#frag",
    "~!@#$%^&*()_+-=[]{}|;':\",./<>?`",
]

_TYPES = {
    1: model_pb2.ModelProto.SentencePiece.NORMAL,
    2: model_pb2.ModelProto.SentencePiece.UNKNOWN,
    3: model_pb2.ModelProto.SentencePiece.CONTROL,
    4: model_pb2.ModelProto.SentencePiece.USER_DEFINED,
    5: model_pb2.ModelProto.SentencePiece.UNUSED,
    6: model_pb2.ModelProto.SentencePiece.BYTE,
}


def processor_from_vocabulary(
    pieces: list[str], scores: list[float], types: list[int], add_space_prefix: bool
) -> spm.SentencePieceProcessor:
    """A BPE processor with byte fallback over exactly these pieces; spaces
    become U+2581, no other normalisation (a GGUF file records none)."""
    proto = model_pb2.ModelProto()
    for piece, score, kind in zip(pieces, scores, types):
        entry = proto.pieces.add()
        entry.piece = piece
        entry.score = score
        entry.type = _TYPES.get(kind, model_pb2.ModelProto.SentencePiece.NORMAL)
    proto.trainer_spec.model_type = model_pb2.TrainerSpec.BPE
    proto.trainer_spec.byte_fallback = any(kind == 6 for kind in types)
    proto.trainer_spec.vocab_size = len(pieces)
    unknown = [i for i, kind in enumerate(types) if kind == 2]
    proto.trainer_spec.unk_id = unknown[0] if unknown else 0
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = add_space_prefix
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.escape_whitespaces = True
    return spm.SentencePieceProcessor(model_proto=proto.SerializeToString())


def encode(
    processor: spm.SentencePieceProcessor, pieces: list[str], types: list[int], text: str
) -> list[int]:
    """`text`'s ids: user-defined pieces (longest first where several start
    at the same place) cut out of the raw text, the rest by `processor`."""
    specials = sorted(
        ((piece, i) for i, (piece, kind) in enumerate(zip(pieces, types)) if kind == 4 and piece),
        key=lambda entry: -len(entry[0]),
    )
    out: list[int] = []
    plain_from = 0
    i = 0
    while i < len(text):
        hit = next(((piece, id_) for piece, id_ in specials if text.startswith(piece, i)), None)
        if hit is None:
            i += 1
            continue
        if i > plain_from:
            out += processor.encode(text[plain_from:i])
        out.append(hit[1])
        i += len(hit[0])
        plain_from = i
    if plain_from < len(text):
        out += processor.encode(text[plain_from:])
    return out


def write_golden(path: Path, header: dict, cases: list[dict]) -> None:
    """The golden file: `header` keys, then the cases (text and ids)."""
    path.write_text(
        json.dumps({**header, "cases": cases}, ensure_ascii=False, indent=1) + "\n",
        encoding="utf-8",
    )
