#include "kernels/copy_slots.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/kv_entry.cuh"
#include "kernels/nvtx_range.h"

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = 128;

__device__ inline bool moves_rows(const KvPlaneView& plane) {
    return !math::quantises_whole_blocks(plane.format);
}

// Grid (count). Bytes of every (plane, head) row of slot slots[blockIdx.x]
// between the pool and the staging area, in the direction `to_pool` says.
__global__ void slot_rows_kernel(PagedKvView cache, const std::int32_t* __restrict__ slots,
                                 std::uint8_t* __restrict__ staging, bool to_pool) {
    const math::SlotAddress slot = math::slot_address(slots[blockIdx.x], cache.block_size);
    const std::int64_t key_row = moves_rows(cache.keys) ? cache.keys.row_bytes : 0;
    const std::int64_t value_row = moves_rows(cache.values) ? cache.values.row_bytes : 0;
    const std::int64_t stride = cache.kv_heads * (cache.keys.row_bytes + cache.values.row_bytes);
    std::uint8_t* stage = staging + blockIdx.x * stride;
    for (int head = 0; head < cache.kv_heads; ++head) {
        for (int plane_index = 0; plane_index < 2; ++plane_index) {
            const KvPlaneView& plane = plane_index == 0 ? cache.keys : cache.values;
            const std::int64_t bytes = plane_index == 0 ? key_row : value_row;
            if (bytes == 0) {
                continue;
            }
            std::uint8_t* row =
                plane.data +
                math::head_block_offset(slot.block, head, cache.kv_heads, plane.head_block_bytes) +
                slot.offset * plane.row_bytes;
            std::uint8_t* staged = stage + head * (cache.keys.row_bytes + cache.values.row_bytes) +
                                   (plane_index == 0 ? 0 : cache.keys.row_bytes);
            for (std::int64_t b = threadIdx.x; b < bytes; b += blockDim.x) {
                if (to_pool) {
                    row[b] = staged[b];
                } else {
                    staged[b] = row[b];
                }
            }
        }
    }
}

// Grid (count): every value of slot from[blockIdx.x], K and V, as fp32.
__global__ void gather_slots_fp32_kernel(PagedKvView cache, const std::int32_t* __restrict__ from,
                                         float* __restrict__ keys_out,
                                         float* __restrict__ values_out) {
    const math::SlotAddress slot = math::slot_address(from[blockIdx.x], cache.block_size);
    const int d = cache.head_dim;
    const int per_plane = cache.kv_heads * d;
    for (int item = threadIdx.x; item < 2 * per_plane; item += blockDim.x) {
        const bool is_key = item < per_plane;
        const int within = is_key ? item : item - per_plane;
        const float value =
            kv_entry_value(cache, is_key, slot.block, slot.offset, within / d, within % d);
        (is_key ? keys_out
                : values_out)[static_cast<std::int64_t>(blockIdx.x) * per_plane + within] = value;
    }
}

} // namespace

// ---- Launchers ----------------------------------------------------------------

void launch_copy_slot_rows(const PagedKvView& cache, const std::int32_t* from,
                           const std::int32_t* to, int count, std::uint8_t* staging,
                           cudaStream_t stream) {
    nvtx::Range range("copy_slot_rows");
    if (count <= 0 || (math::quantises_whole_blocks(cache.keys.format) &&
                       math::quantises_whole_blocks(cache.values.format))) {
        return;
    }
    // Two launches: every source is staged before any destination is written.
    slot_rows_kernel<<<count, kThreads, 0, stream>>>(cache, from, staging, false);
    KVSCOPE_CHECK_LAUNCH("slot_rows_kernel (gather)");
    slot_rows_kernel<<<count, kThreads, 0, stream>>>(cache, to, staging, true);
    KVSCOPE_CHECK_LAUNCH("slot_rows_kernel (scatter)");
}

void launch_gather_slots_fp32(const PagedKvView& cache, const std::int32_t* from, int count,
                              float* keys_out, float* values_out, cudaStream_t stream) {
    nvtx::Range range("gather_slots_fp32");
    if (count <= 0) {
        return;
    }
    gather_slots_fp32_kernel<<<count, kThreads, 0, stream>>>(cache, from, keys_out, values_out);
    KVSCOPE_CHECK_LAUNCH("gather_slots_fp32_kernel");
}

} // namespace kvscope::kernels
