#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/math/kv_codec_math.h"
#include "kernels/math/paged_slots.h"
#include "kernels/nvtx_range.h"
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
    return math::rope_cos_sin(position, pair, table.head_dim, table.theta_base,
                              math::rope_divisor(table.divisors, pair));
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

// Where a (head, dimension pair) item's values go: Q into the attention's
// input, K and V into their slots of the pool, as a 32-bit store of the
// pair's two encoded values.
struct RowTargets {
    PagedKvView cache;
    float* q_row; // this token's Q heads
    math::SlotAddress slot;
    int heads;

    // Stores values d, d+1 of head `head` (of the fused row's heads).
    __device__ void store(int head, int d, float a, float b) const {
        const int head_dim = cache.head_dim;
        if (head < heads) {
            float* dst = q_row + head * head_dim + d;
            dst[0] = a;
            dst[1] = b;
            return;
        }
        const bool is_key = head < heads + cache.kv_heads;
        const int kv_head = is_key ? head - heads : head - heads - cache.kv_heads;
        const KvPlaneView& plane = is_key ? cache.keys : cache.values;
        std::uint8_t* cache_row =
            plane.data +
            math::head_block_offset(slot.block, kv_head, cache.kv_heads, plane.head_block_bytes) +
            static_cast<std::int64_t>(slot.offset) * plane.row_bytes;
        reinterpret_cast<std::uint32_t*>(cache_row)[d / 2] = encode_pair(plane.format, a, b);
    }
};

// One block per token; a thread per (head, item): Q heads, then K heads, then
// V heads, consecutive threads on consecutive items. Adjacent pairing: an
// item is one pair (2i, 2i+1). Halves pairing: an item is pairs 2i and 2i+1,
// whose dimensions (2i, 2i+1) and (2i + d/2, 2i+1 + d/2) make two whole
// 32-bit stores.
template <bool Halves>
__global__ void rope_kv_write_kernel(PagedKvView cache, const float* __restrict__ qkv,
                                     float* __restrict__ q,
                                     const std::int32_t* __restrict__ positions,
                                     const std::int32_t* __restrict__ slot_mapping,
                                     RopeTableView table, int heads) {
    wait_for_previous_kernel();
    const int token = blockIdx.x;
    const int d = cache.head_dim;
    const int items = Halves ? d / 4 : d / 2;
    const int kv_heads = cache.kv_heads;
    const int position = positions[token];
    const int row_heads = heads + 2 * kv_heads;
    const float* row = qkv + static_cast<std::int64_t>(token) * row_heads * d;
    const RowTargets targets{cache, q + static_cast<std::int64_t>(token) * heads * d,
                             math::slot_address(slot_mapping[token], cache.block_size), heads};
    for (int work = threadIdx.x; work < row_heads * items; work += blockDim.x) {
        const int head = work / items;
        const int item = work % items;
        const float* in = row + head * d;
        const bool rotated = head < heads + kv_heads; // Q and K are, V is not
        if (!Halves) {
            float values[2] = {in[2 * item], in[2 * item + 1]};
            if (rotated) {
                math::rope_rotate_pair(values, rope_angle(table, position, item));
            }
            targets.store(head, 2 * item, values[0], values[1]);
            continue;
        }
        const int low = 2 * item;     // dimensions low, low + 1 ...
        const int high = low + d / 2; // ... and their partners high, high + 1
        float a0 = in[low];
        float a1 = in[low + 1];
        float b0 = in[high];
        float b1 = in[high + 1];
        if (rotated) {
            math::rope_rotate(a0, b0, rope_angle(table, position, low));
            math::rope_rotate(a1, b1, rope_angle(table, position, low + 1));
        }
        targets.store(head, low, a0, a1);
        targets.store(head, high, b0, b1);
    }
}

bool is_16_bit(kv::KvFormat format) {
    return format == kv::KvFormat::f16 || format == kv::KvFormat::bf16;
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

std::vector<math::RopeCosSin> rope_table(int positions, int head_dim, float theta_base,
                                         const float* divisors) {
    const int pairs = head_dim / 2;
    std::vector<math::RopeCosSin> angles(static_cast<std::size_t>(positions) * pairs);
    for (int p = 0; p < positions; ++p) {
        for (int i = 0; i < pairs; ++i) {
            angles[static_cast<std::size_t>(p) * pairs + i] =
                math::rope_cos_sin(p, i, head_dim, theta_base, math::rope_divisor(divisors, i));
        }
    }
    return angles;
}

bool rope_kv_write_fits(const PagedKvView& cache, bool halves) {
    return is_16_bit(cache.keys.format) && is_16_bit(cache.values.format) &&
           cache.head_dim % (halves ? 4 : 2) == 0 &&
           reinterpret_cast<std::uintptr_t>(cache.keys.data) % 4 == 0 &&
           reinterpret_cast<std::uintptr_t>(cache.values.data) % 4 == 0;
}

void launch_rope_kv_write(const PagedKvView& cache, const float* qkv, float* q,
                          const std::int32_t* positions, const std::int32_t* slot_mapping,
                          const RopeTableView& table, int tokens, int heads, bool halves,
                          cudaStream_t stream) {
    nvtx::Range range("rope_kv_write");
    if (!rope_kv_write_fits(cache, halves) || table.head_dim != cache.head_dim) {
        throw std::invalid_argument("rope_kv_write: K and V must be f16 or bf16, the head_dim "
                                    "even (a multiple of 4 for halves pairing), and the angle "
                                    "table of the cache's head_dim");
    }
    if (tokens <= 0) {
        return;
    }
    launch_kernel("rope_kv_write_kernel",
                  halves ? rope_kv_write_kernel<true> : rope_kv_write_kernel<false>, dim3(tokens),
                  dim3(kThreads), 0, stream, cache, qkv, q, positions, slot_mapping, table, heads);
}

} // namespace kvscope::kernels
