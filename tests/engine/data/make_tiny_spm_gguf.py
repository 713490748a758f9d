#!/usr/bin/env python3
"""Writes tiny_spm.gguf and golden_tiny_spm.json: a SentencePiece vocabulary
small enough to commit, and the ids Google's sentencepiece library gives for a
test set, the independent reference for kvscope's tokenizer of
tokenizer.ggml.model "llama" (Gemma, Llama 2, Mistral's older files). Also
tiny_spm_prefix.gguf and golden_tiny_spm_prefix.json: the same pieces with
Llama 2's leading space (add_space_prefix) and every seventh multi-character
piece marked unused (merges may make it, the encoder splits it back), the
paths Gemma's vocabulary does not take.

The vocabulary is trained here by sentencepiece itself (BPE, byte fallback,
no dummy prefix, whitespace kept, as Gemma's is) on the project's evaluation
texts, with user-defined pieces for runs of newlines (Gemma has those too).
It is written to GGUF as llama.cpp's converter writes one: tokens, scores and
token types (which use SentencePiece's own type numbers). The golden ids come
from a sentencepiece processor loaded from a model rebuilt from that GGUF
data alone, so the test checks what a GGUF file can say, nothing more.

Run by hand when it needs to change (not in CI):
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install gguf sentencepiece protobuf numpy
    /tmp/ref/bin/python tests/engine/data/make_tiny_spm_gguf.py
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import sentencepiece as spm
from gguf import GGUFWriter

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "reference"))
from spm_reference import TEST_TEXTS, encode, processor_from_vocabulary, write_golden  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "tiny_spm.gguf"
GOLDEN = HERE / "golden_tiny_spm.json"
CORPUS = sorted((HERE.parents[2] / "resources" / "eval").glob("*.txt"))


def train() -> spm.SentencePieceProcessor:
    text = "\n".join(p.read_text(encoding="utf-8") for p in CORPUS) if CORPUS else ""
    if not text:
        sys.exit("no evaluation texts under resources/eval")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text.splitlines()),
        model_writer=model,
        model_type="bpe",
        vocab_size=700,
        byte_fallback=True,
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        split_digits=True,
        character_coverage=0.9995,
        user_defined_symbols=["\n", "\n\n", "\n\n\n", "<start_of_turn>", "<end_of_turn>"],
        control_symbols=[],
        bos_id=2,
        eos_id=1,
        unk_id=3,
        pad_id=0,
        bos_piece="<bos>",
        eos_piece="<eos>",
        unk_piece="<unk>",
        pad_piece="<pad>",
        minloglevel=2,
    )
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def main() -> None:
    trained = train()
    pieces = [trained.id_to_piece(i) for i in range(trained.get_piece_size())]
    scores = [trained.get_score(i) for i in range(trained.get_piece_size())]
    types = []
    for i in range(trained.get_piece_size()):
        if trained.is_control(i):
            types.append(3)
        elif trained.is_unknown(i):
            types.append(2)
        elif trained.is_byte(i):
            types.append(6)
        elif trained.is_unused(i):
            types.append(5)
        elif pieces[i] in ("\n", "\n\n", "\n\n\n", "<start_of_turn>", "<end_of_turn>"):
            types.append(4)
        else:
            types.append(1)

    write(OUT, GOLDEN, pieces, scores, types, add_space_prefix=False)
    unused = [
        5 if kind == 1 and len(piece) > 1 and i % 7 == 0 else kind
        for i, (piece, kind) in enumerate(zip(pieces, types))
    ]
    write(HERE / "tiny_spm_prefix.gguf", HERE / "golden_tiny_spm_prefix.json", pieces, scores,
          unused, add_space_prefix=True)


def write(out: Path, golden: Path, pieces, scores, types, add_space_prefix: bool) -> None:
    writer = GGUFWriter(str(out), arch="llama")
    writer.add_name("tiny SentencePiece vocabulary")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(pieces)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(1)
    writer.add_unk_token_id(3)
    writer.add_pad_token_id(0)
    writer.add_add_space_prefix(add_space_prefix)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    reference = processor_from_vocabulary(pieces, scores, types, add_space_prefix)
    cases = [{"text": t, "ids": encode(reference, pieces, types, t)} for t in TEST_TEXTS]
    write_golden(
        golden,
        {
            "source": "tests/engine/data/make_tiny_spm_gguf.py (sentencepiece "
            + spm.__version__
            + ")",
            "add_space_prefix": add_space_prefix,
        },
        cases,
    )
    print(f"wrote {out} ({out.stat().st_size} bytes) and {golden} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
