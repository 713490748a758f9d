// Where a cache entry lives in the paged KV pool. A slot is
// block * block_size + offset; each layer's K (and V) plane is laid out as
// (num_blocks, kv_heads, head_block_bytes). The CPU KV store and the CUDA
// kernels address the pool through these, so both read the same bytes.
#pragma once

#include "kernels/math/host_device.h"

#include <cstdint>

namespace kvscope::math {

struct SlotAddress {
    std::int32_t block;
    int offset; // token within the block
};

KVSCOPE_HD inline SlotAddress slot_address(std::int32_t slot, int block_size) {
    return {slot / block_size, slot % block_size};
}

// Byte offset of (block, head) within one plane.
KVSCOPE_HD inline std::int64_t head_block_offset(std::int32_t block, int head, int kv_heads,
                                                 std::int64_t head_block_bytes) {
    return (static_cast<std::int64_t>(block) * kv_heads + head) * head_block_bytes;
}

// The physical block holding a sequence's cache entry `entry`, from its block
// table (the sequence's blocks in order).
KVSCOPE_HD inline std::int32_t block_of_entry(const std::int32_t* table, std::int32_t entry,
                                              int block_size) {
    return table[entry / block_size];
}

// Byte offset within one plane of a sequence's cache entry `entry` of KV
// head `head`: its block's (block, head) run, then its row in that run.
KVSCOPE_HD inline std::int64_t entry_row_offset(const std::int32_t* table, std::int32_t entry,
                                                int block_size, int head, int kv_heads,
                                                std::int64_t head_block_bytes,
                                                std::int64_t row_bytes) {
    return head_block_offset(block_of_entry(table, entry, block_size), head, kv_heads,
                             head_block_bytes) +
           static_cast<std::int64_t>(entry % block_size) * row_bytes;
}

// The first cache entry a query with `context` entries attends: 0, or for a
// sliding window of `window` positions (the query's own included) the
// oldest one still inside it.
KVSCOPE_HD inline std::int32_t attended_first(std::int32_t context, std::int32_t window) {
    return window > 0 && context > window ? context - window : 0;
}

} // namespace kvscope::math
