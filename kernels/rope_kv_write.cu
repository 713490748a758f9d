#include "engine/math/kv_codec_math.h"
#include "engine/math/paged_slots.h"
#include "kernels/cuda_check.cuh"
#include "kernels/nvtx_range.cuh"
#include "kernels/rope_kv_write.cuh"

#include <stdexcept>

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = 128;

__device__ inline math::RopeCosSin rope_angle(const RopeTableView& table, int position, int pair) {
    if (position >= 0 && position < table.positions) {
        return table.angles[static_cast<std::int64_t>(position) * (table.head_dim / 2) + pair];
    }
    return math::rope_cos_sin(position, pair, table.head_dim, table.theta_base);
}

// The pair's two values as the format stores them, low value first (the
// pool is little-endian, as the CPU's encode_row writes it).
__device__ inline std::uint32_t encode_pair(kv::KvFormat format, float a, float b) {
    if (format == kv::KvFormat::bf16) {
        return static_cast<std::uint32_t>(fp32_to_bf16(a)) |
               (static_cast<std::uint32_t>(fp32_to_bf16(b)) << 16);
    }
    return static_cast<std::uint32_t>(fp32_to_fp16(a)) |
           (static_cast<std::uint32_t>(fp32_to_fp16(b)) << 16);
}

// One block per token; a thread per (head, pair) item: Q heads, then K heads,
// then V heads, consecutive threads on consecutive pairs.
__global__ void rope_kv_write_kernel(PagedKvView cache, const float* __restrict__ qkv,
                                     float* __restrict__ q,
                                     const std::int32_t* __restrict__ positions,
                                     const std::int32_t* __restrict__ slot_mapping,
                                     RopeTableView table, int heads) {
    const int token = blockIdx.x;
    const int d = cache.head_dim;
    const int pairs = d / 2;
    const int kv_heads = cache.kv_heads;
    const int position = positions[token];
    const math::SlotAddress slot = math::slot_address(slot_mapping[token], cache.block_size);
    const int row_heads = heads + 2 * kv_heads;
    const float* row = qkv + static_cast<std::int64_t>(token) * row_heads * d;
    for (int item = threadIdx.x; item < row_heads * pairs; item += blockDim.x) {
        const int head = item / pairs;
        const int pair = item % pairs;
        float values[2] = {row[head * d + 2 * pair], row[head * d + 2 * pair + 1]};
        if (head < heads + kv_heads) { // Q and K are rotated, V is not
            math::rope_rotate_pair(values, rope_angle(table, position, pair));
        }
        if (head < heads) {
            float* dst = q + (static_cast<std::int64_t>(token) * heads + head) * d + 2 * pair;
            dst[0] = values[0];
            dst[1] = values[1];
            continue;
        }
        const bool is_key = head < heads + kv_heads;
        const int kv_head = is_key ? head - heads : head - heads - kv_heads;
        const KvPlaneView& plane = is_key ? cache.keys : cache.values;
        std::uint8_t* cache_row =
            plane.data +
            math::head_block_offset(slot.block, kv_head, kv_heads, plane.head_block_bytes) +
            static_cast<std::int64_t>(slot.offset) * plane.row_bytes;
        reinterpret_cast<std::uint32_t*>(cache_row)[pair] =
            encode_pair(plane.format, values[0], values[1]);
    }
}

bool is_16_bit(kv::KvFormat format) {
    return format == kv::KvFormat::f16 || format == kv::KvFormat::bf16;
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

std::vector<math::RopeCosSin> rope_table(int positions, int head_dim, float theta_base) {
    const int pairs = head_dim / 2;
    std::vector<math::RopeCosSin> angles(static_cast<std::size_t>(positions) * pairs);
    for (int p = 0; p < positions; ++p) {
        for (int i = 0; i < pairs; ++i) {
            angles[static_cast<std::size_t>(p) * pairs + i] =
                math::rope_cos_sin(p, i, head_dim, theta_base);
        }
    }
    return angles;
}

bool rope_kv_write_fits(const PagedKvView& cache) {
    return is_16_bit(cache.keys.format) && is_16_bit(cache.values.format) &&
           cache.head_dim % 2 == 0 && reinterpret_cast<std::uintptr_t>(cache.keys.data) % 4 == 0 &&
           reinterpret_cast<std::uintptr_t>(cache.values.data) % 4 == 0;
}

void launch_rope_kv_write(const PagedKvView& cache, const float* qkv, float* q,
                          const std::int32_t* positions, const std::int32_t* slot_mapping,
                          const RopeTableView& table, int tokens, int heads, cudaStream_t stream) {
    NvtxRange range("rope_kv_write");
    if (!rope_kv_write_fits(cache) || table.head_dim != cache.head_dim) {
        throw std::invalid_argument("rope_kv_write: K and V must be f16 or bf16, and the angle "
                                    "table of the cache's head_dim");
    }
    if (tokens <= 0) {
        return;
    }
    rope_kv_write_kernel<<<tokens, kThreads, 0, stream>>>(cache, qkv, q, positions, slot_mapping,
                                                          table, heads);
    KVSCOPE_CHECK_LAUNCH("rope_kv_write_kernel");
}

} // namespace kvscope::kernels
