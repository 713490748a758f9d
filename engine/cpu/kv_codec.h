// Encoding and decoding of K/V rows in every KV format, on the CPU. A "row" is
// one token's vector for one KV head (head_dim values); a "head block" is one
// head's slice of one cache block, laid out as kv::kv_head_block_bytes says.
#pragma once

#include "engine/kv/kv_format.h"

#include <cstddef>

namespace kvscope::cpu {

// Per-token formats (all but KIVI keys): row -> `row` bytes (kv_row_bytes).
// KIVI values use their per-token rows too, written when the block fills.
void encode_kv_row(kv::KvFormat format, const float* src, int head_dim, std::byte* row);

// `count` consecutive rows of a per-token format -> out (count, head_dim).
void decode_kv_rows(kv::KvFormat format, const std::byte* rows, int count, int head_dim,
                    float* out);

// KIVI keys of one full head block: tile (block_size, head_dim) -> head_block.
// Each channel is quantised over the block's tokens with its own scale and
// minimum, so outlier channels (which keys have) do not swamp the others.
void encode_kivi_keys(int bits, const float* tile, int block_size, int head_dim,
                      std::byte* head_block);

// Rows [first, first + count) of KIVI keys -> out (count, head_dim).
void decode_kivi_keys(int bits, const std::byte* head_block, int block_size, int head_dim,
                      int first, int count, float* out);

// fp8 E4M3 (the OCP "FN" variant: no infinities, largest finite 448), rounded
// to nearest even and saturated; exposed for tests.
std::uint8_t fp32_to_e4m3(float value);
float e4m3_to_fp32(std::uint8_t code);

} // namespace kvscope::cpu
