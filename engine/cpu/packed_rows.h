// The row layout the fused integer kernels read Q4_0, Q4_1 and Q8_0 weights
// in. GGUF interleaves each block's fp16 scale with its 16 or 32 bytes of
// quantised values; here a row holds all its blocks' scales d, then all their
// offsets m (value = q * d + m), then all their quantised values. Eight blocks'
// scales convert with one instruction, and a row is read front to back in one
// stream, which the hardware prefetcher follows (scales at the end of the row
// cost a cache miss per row). Same size as the GGUF row plus 2 bytes a block
// for Q4_0 and Q8_0.
#pragma once

#include "engine/cpu/matmul.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvscope::cpu {

// Bytes of quantised values per 32-value block in the packed layout: 16 for
// Q4_0 and Q4_1 (nibbles), 32 for Q8_0; 0 for types that are not packed.
std::size_t packed_quant_bytes(gguf::TensorType type);

inline std::size_t packed_row_bytes(gguf::TensorType type, std::int64_t cols) {
    return static_cast<std::size_t>(cols / 32) * (packed_quant_bytes(type) + 4);
}

// Repacks a GGUF-layout matrix (Q4_0, Q4_1 or Q8_0) into `storage` and
// returns the view of it (packed = true). For Q4_0 the offset stored is -8 d,
// which is exact in fp16; for Q8_0 it is 0.
WeightMatrix pack_rows(const WeightMatrix& gguf_layout, std::vector<std::byte>& storage);

// Row `row` of a packed matrix as fp32 (embedding look-ups; tests).
void unpack_row(const WeightMatrix& packed, std::int64_t row, float* out);

} // namespace kvscope::cpu
