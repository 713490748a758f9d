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

// The cache entries [begin, end) that split `split` of `length` entries holds
// for a query with `context` entries: splits are cut from the first entry it
// attends, so split s starts s * length entries past attended_first; empty
// (begin == end) past its context. Every attention cuts them so (the CPU's
// segments, the CUDA split kernels, the tile attention), and the merges
// count split_count of them.
struct EntryRange {
    std::int32_t begin;
    std::int32_t end;
};
KVSCOPE_HD inline EntryRange split_entries(std::int32_t context, std::int32_t window,
                                           std::int32_t split, std::int32_t length) {
    const std::int32_t begin = attended_first(context, window) + split * length;
    const std::int32_t end = begin + length < context ? begin + length : context;
    return {begin, end > begin ? end : begin};
}
KVSCOPE_HD inline std::int32_t split_count(std::int32_t context, std::int32_t window,
                                           std::int32_t length) {
    return (context - attended_first(context, window) + length - 1) / length;
}

} // namespace kvscope::math
