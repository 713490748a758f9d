#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/math/kv_codec_math.h"
#include "kernels/math/paged_slots.h"
#include "kernels/nvtx_range.h"
#include "kernels/rope_kv_write.cuh"

#include <stdexcept>
#include <string>

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
//
// Normed: first a warp per Q and K head finds its 1 / rms exactly as
// rms_norm_heads_kernel does (rms_norm.cu: the same strided sums, the same
// shuffles, rsqrtf), into shared memory; then every Q and K value is
// value * inv_rms * weight, the in-place norm's expression, before RoPE.
template <bool Halves, bool Normed>
__global__ void rope_kv_write_kernel(PagedKvView cache, const float* __restrict__ qkv,
                                     float* __restrict__ q,
                                     const std::int32_t* __restrict__ positions,
                                     const std::int32_t* __restrict__ slot_mapping,
                                     RopeTableView table, int heads, QkNorms norms) {
    __shared__ float inv_rms[Normed ? kMaxNormedHeads : 1];
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
    if constexpr (Normed) {
        const int lane = static_cast<int>(threadIdx.x) % 32;
        const int warps = static_cast<int>(blockDim.x) / 32;
        for (int head = static_cast<int>(threadIdx.x) / 32; head < heads + kv_heads;
             head += warps) {
            const float* values = row + head * d;
            float sum_sq = 0.0f;
            for (int i = lane; i < d; i += 32) {
                sum_sq += values[i] * values[i];
            }
            for (int offset = 16; offset > 0; offset /= 2) {
                sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
            }
            if (lane == 0) {
                inv_rms[head] = rsqrtf(sum_sq / static_cast<float>(d) + norms.eps);
            }
        }
        __syncthreads();
    }
    // Value i of head `head` as RoPE takes it: normed where asked (Q and K).
    const auto value = [&](int head, int i) {
        const float x = row[head * d + i];
        if constexpr (Normed) {
            if (head < heads + kv_heads) {
                const float* weight = head < heads ? norms.q_weight : norms.k_weight;
                return x * inv_rms[head] * weight[i];
            }
        }
        return x;
    };
    for (int work = threadIdx.x; work < row_heads * items; work += blockDim.x) {
        const int head = work / items;
        const int item = work % items;
        const bool rotated = head < heads + kv_heads; // Q and K are, V is not
        if (!Halves) {
            float values[2] = {value(head, 2 * item), value(head, 2 * item + 1)};
            if (rotated) {
                math::rope_rotate_pair(values, rope_angle(table, position, item));
            }
            targets.store(head, 2 * item, values[0], values[1]);
            continue;
        }
        const int low = 2 * item;     // dimensions low, low + 1 ...
        const int high = low + d / 2; // ... and their partners high, high + 1
        float a0 = value(head, low);
        float a1 = value(head, low + 1);
        float b0 = value(head, high);
        float b1 = value(head, high + 1);
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
                          cudaStream_t stream, const QkNorms& norms) {
    nvtx::Range range("rope_kv_write");
    if (!rope_kv_write_fits(cache, halves) || table.head_dim != cache.head_dim) {
        throw std::invalid_argument("rope_kv_write: K and V must be f16 or bf16, the head_dim "
                                    "even (a multiple of 4 for halves pairing), and the angle "
                                    "table of the cache's head_dim");
    }
    const bool normed = norms.q_weight != nullptr || norms.k_weight != nullptr;
    if (normed && (norms.q_weight == nullptr || norms.k_weight == nullptr ||
                   heads + cache.kv_heads > kMaxNormedHeads)) {
        throw std::invalid_argument("rope_kv_write: QK norms need both weights and at most " +
                                    std::to_string(kMaxNormedHeads) + " Q and K heads");
    }
    if (tokens <= 0) {
        return;
    }
    const auto kernel =
        normed ? (halves ? rope_kv_write_kernel<true, true> : rope_kv_write_kernel<false, true>)
               : (halves ? rope_kv_write_kernel<true, false> : rope_kv_write_kernel<false, false>);
    launch_kernel("rope_kv_write_kernel", kernel, dim3(tokens), dim3(kThreads), 0, stream, cache,
                  qkv, q, positions, slot_mapping, table, heads, norms);
}

} // namespace kvscope::kernels
