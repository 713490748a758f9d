// The row layout the fused integer kernels read quantised weights in. GGUF
// interleaves each block's scales with its quantised values; here a row holds
// all its 32-value blocks' scales d, then all their offsets m (value = q * d +
// m), then all their quantised values: a nibble a value (the Q4_1 layout) or
// a signed byte a value (the Q8_0 layout). Eight blocks' scales convert with
// one instruction, and a row is read front to back in one stream, which the
// hardware prefetcher follows (scales at the end of the row cost a cache miss
// per row).
//
// Many GGUF types map onto the two layouts (packed_layout):
//   Q4_0, Q4_1          -> nibbles, exactly (Q4_0's offset -8 d is exact in fp16)
//   Q4_K                -> nibbles; each 32-value sub-block's scale d * sc and
//                          offset -dmin * m rounded to fp16 (relative 2^-11)
//   Q8_0, Q5_0, Q5_1    -> bytes, exactly (Q5_0's codes stored as q - 16)
//   Q3_K, Q5_K, Q6_K    -> the split layout (below), exactly
//   Q2_K                -> none: a scale and an offset every 16 values fit
//                          neither layout; its rows are expanded to fp32
//
// The split layout (tagged Q8_K) is for the K-quants whose scales d * sc are
// not fp16 values and, for Q3_K and Q6_K, change every 16 values: per 32-value
// block two fp32 scales (values 0-15, 16-31) and an fp32 offset, then signed
// bytes (Q6_K's q - 32, Q5_K's q, Q3_K's signed 3-bit q). 1.4 bytes a value against Q6_K's 0.8, the
// price of exactness: requantising Q6_K as Q8_0 moved Gemma 3 270M's next-token distributions 30
// times further from transformers' (KL 7.6e-5 against 2.3e-6, top-1 agreement 98.7% against 100%).
// A packed matrix's `type` is its layout's (Q4_1, Q8_0, or Q8_K for the split
// layout: only a tag, its GGUF block size means nothing here), not the file's.
#pragma once

#include "engine/cpu/matmul.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace kvscope::cpu {

// The packed layout a GGUF type is read in (Q4_1: nibbles; Q8_0: bytes; Q8_K:
// split bytes), or nullopt when the fused kernels do not take it.
std::optional<gguf::TensorType> packed_layout(gguf::TensorType type);

// Bytes of quantised values per 32-value block of a packed layout: 16 for
// Q4_1 (nibbles), 32 for Q8_0 and Q8_K; 0 for other types.
std::size_t packed_quant_bytes(gguf::TensorType layout);

// Bytes of scales and offsets per 32-value block: 4 (two fp16), 12 for Q8_K
// (three fp32).
inline std::size_t packed_header_bytes(gguf::TensorType layout) {
    return layout == gguf::TensorType::Q8_K ? 12 : 4;
}

inline std::size_t packed_row_bytes(gguf::TensorType layout, std::int64_t cols) {
    return static_cast<std::size_t>(cols / 32) *
           (packed_quant_bytes(layout) + packed_header_bytes(layout));
}

// Repacks a GGUF-layout matrix of a type packed_layout() takes (rows a whole
// number of its blocks) into `storage` and returns the view of it (packed =
// true, type = the layout). Throws std::invalid_argument for other matrices.
WeightMatrix pack_rows(const WeightMatrix& gguf_layout, std::vector<std::byte>& storage);

// Row `row` of a packed matrix as fp32 (embedding look-ups; tests).
void unpack_row(const WeightMatrix& packed, std::int64_t row, float* out);

} // namespace kvscope::cpu
