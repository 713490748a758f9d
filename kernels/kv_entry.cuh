// Reading one value of one cache entry on the device, in any KV format: the
// open fp32 copy of a KIVI block not yet full, else the pool's bytes decoded
// by the CPU's decoders (kernels/math/kv_codec_math.h). Device-only helper
// shared by the attention, capture and slot-copy kernels.
#pragma once

#include "kernels/math/kv_codec_math.h"
#include "kernels/math/paged_slots.h"
#include "kernels/paged_kv_view.cuh"

namespace kvscope::kernels {

// Value i of (block, offset) of `head`'s K (is_key) or V.
__device__ inline float kv_entry_value(const PagedKvView& cache, bool is_key, std::int32_t block,
                                       int offset, int head, int i) {
    const KvPlaneView& plane = is_key ? cache.keys : cache.values;
    const int d = cache.head_dim;
    if (math::quantises_whole_blocks(plane.format)) {
        const std::int32_t open_slot = cache.open.read_slot[block];
        if (open_slot >= 0) {
            return cache.open_tile(open_slot, is_key,
                                   head)[static_cast<std::int64_t>(offset) * d + i];
        }
    }
    const std::uint8_t* head_block =
        plane.data + math::head_block_offset(block, head, cache.kv_heads, plane.head_block_bytes);
    if (is_key && math::quantises_whole_blocks(plane.format)) {
        return math::decode_kivi_key_element(math::kivi_bits(plane.format), head_block, d, offset,
                                             i);
    }
    return math::decode_row_element(
        plane.format, head_block + static_cast<std::int64_t>(offset) * plane.row_bytes, d, i);
}

} // namespace kvscope::kernels
