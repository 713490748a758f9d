#include "engine/math/paged_slots.h"
#include "kernels/attention_scores.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/vector_attention.cuh"

#include <cfloat>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdexcept>
#include <string>

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = kAttentionThreads;
constexpr int kBlockWarps = kThreads / 32;
// Rows of K and of V each lane loads before it uses any: 8 loads of 16 bytes
// in flight per lane, 4 KiB per warp, whatever the head size.
constexpr int kRowLoads = 4;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kAllLanes = 0xffffffffu;

// The two 16-bit values of one 32-bit word, low half first, widened exactly
// (as math::fp16_to_fp32 and math::bf16_to_fp32 do on the host).
__device__ inline float2 widen_pair(std::uint32_t word, __half) {
    return __half22float2(*reinterpret_cast<const __half2*>(&word));
}
__device__ inline float2 widen_pair(std::uint32_t word, __nv_bfloat16) {
    return make_float2(__uint_as_float(word << 16), __uint_as_float(word & 0xffff0000u));
}

// Eight consecutive values of a row from one 16-byte load.
template <typename Elem>
__device__ inline void widen8(const uint4& raw, float (&out)[8]) {
    const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        const float2 pair = widen_pair(words[w], Elem{});
        out[2 * w] = pair.x;
        out[2 * w + 1] = pair.y;
    }
}

// Grid (tokens, kv_heads, splits), as the general split kernel's; writes the
// same partial output, maximum and sum per query head of the group.
//
// Lane layout: a row of D 16-bit values is D / 8 chunks of 16 bytes; kRowLanes
// lanes share a row, chunk = lane % kRowLanes, and a warp covers kLoadRows
// rows per load. Each lane keeps the online softmax state of the rows it saw
// (all lanes of a row hold the same scores after the row's reduction), so no
// exchange happens inside the loop; the states of a warp's row positions, then
// of the block's warps, are merged once at the end.
template <typename Elem, int D, int G>
__global__ void __launch_bounds__(kThreads)
    vector_attention_split_kernel(PagedKvView cache, DeviceBatchView batch,
                                  const float* __restrict__ q, int heads, float scale,
                                  int max_splits, AttentionWorkspace workspace) {
    constexpr int kRowLanes = D / 8;
    constexpr int kLoadRows = 32 / kRowLanes;
    constexpr int kTileRows = kLoadRows * kRowLoads;
    static_assert(D % 8 == 0 && 32 % kRowLanes == 0, "a row must split into a warp's lanes");
    __shared__ float warp_out[kBlockWarps][G][D];
    __shared__ float warp_max[kBlockWarps][G];
    __shared__ float warp_sum[kBlockWarps][G];

    const SplitBlock b = split_block(cache, batch, heads, workspace.split);
    if (b.n == 0) {
        return; // uniform over the block: the merge reads only the splits a context has
    }
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int load_row = lane / kRowLanes;
    const int chunk = lane % kRowLanes;
    const int group = b.group;

    // This lane's 8 values of each query of the group, scaled so that scores
    // come out in log2 units (exp2 below). Heads past the group stay zero.
    float qr[G][8];
    const float q_scale = scale * kLog2e;
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            qr[g][i] = 0.0f;
        }
        if (g < group) {
            const float4* src = reinterpret_cast<const float4*>(
                q + (static_cast<std::int64_t>(b.token) * heads + b.first_head + g) * D +
                chunk * 8);
            const float4 lo = src[0];
            const float4 hi = src[1];
            qr[g][0] = lo.x * q_scale;
            qr[g][1] = lo.y * q_scale;
            qr[g][2] = lo.z * q_scale;
            qr[g][3] = lo.w * q_scale;
            qr[g][4] = hi.x * q_scale;
            qr[g][5] = hi.y * q_scale;
            qr[g][6] = hi.z * q_scale;
            qr[g][7] = hi.w * q_scale;
        }
    }

    float m[G];      // running maximum (log2 units)
    float l[G];      // running sum of exp2(score - m)
    float acc[G][8]; // running sum of exp2(score - m) * value, this lane's 8 dimensions
#pragma unroll
    for (int g = 0; g < G; ++g) {
        m[g] = -FLT_MAX;
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            acc[g][i] = 0.0f;
        }
    }

    const std::uint8_t* __restrict__ keys = cache.keys.data;
    const std::uint8_t* __restrict__ values = cache.values.data;
    for (int tile = warp * kTileRows; tile < b.n; tile += kBlockWarps * kTileRows) {
        // Every load of the tile first, then the arithmetic.
        uint4 k_raw[kRowLoads];
        uint4 v_raw[kRowLoads];
        bool valid[kRowLoads];
#pragma unroll
        for (int r = 0; r < kRowLoads; ++r) {
            const int j = tile + r * kLoadRows + load_row;
            valid[r] = j < b.n;
            k_raw[r] = make_uint4(0, 0, 0, 0);
            v_raw[r] = make_uint4(0, 0, 0, 0);
            if (valid[r]) {
                const int entry = b.begin + j;
                const std::int32_t block = math::block_of_entry(b.table, entry, cache.block_size);
                const std::int64_t offset = entry % cache.block_size;
                const std::int64_t k_at = math::head_block_offset(block, b.kv_head, cache.kv_heads,
                                                                  cache.keys.head_block_bytes) +
                                          offset * cache.keys.row_bytes + chunk * 16;
                const std::int64_t v_at = math::head_block_offset(block, b.kv_head, cache.kv_heads,
                                                                  cache.values.head_block_bytes) +
                                          offset * cache.values.row_bytes + chunk * 16;
                k_raw[r] = __ldg(reinterpret_cast<const uint4*>(keys + k_at));
                v_raw[r] = __ldg(reinterpret_cast<const uint4*>(values + v_at));
            }
        }
        // Scores of the tile's rows, summed over each row's lanes.
        float p[kRowLoads][G];
#pragma unroll
        for (int r = 0; r < kRowLoads; ++r) {
            float k_values[8];
            widen8<Elem>(k_raw[r], k_values);
#pragma unroll
            for (int g = 0; g < G; ++g) {
                float dot = 0.0f;
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    dot = fmaf(qr[g][i], k_values[i], dot);
                }
#pragma unroll
                for (int o = kRowLanes / 2; o > 0; o /= 2) {
                    dot += __shfl_xor_sync(kAllLanes, dot, o);
                }
                p[r][g] = dot;
            }
        }
        // Online softmax: rescale the state to the new maximum, then add the
        // tile's weights (rows past the split weigh nothing).
#pragma unroll
        for (int g = 0; g < G; ++g) {
            float tile_max = -FLT_MAX;
#pragma unroll
            for (int r = 0; r < kRowLoads; ++r) {
                tile_max = valid[r] ? fmaxf(tile_max, p[r][g]) : tile_max;
            }
            const float m_new = fmaxf(m[g], tile_max);
            const float rescale = exp2f(m[g] - m_new);
            float added = 0.0f;
#pragma unroll
            for (int r = 0; r < kRowLoads; ++r) {
                p[r][g] = valid[r] ? exp2f(p[r][g] - m_new) : 0.0f;
                added += p[r][g];
            }
            l[g] = l[g] * rescale + added;
            m[g] = m_new;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                acc[g][i] *= rescale;
            }
        }
#pragma unroll
        for (int r = 0; r < kRowLoads; ++r) {
            float v_values[8];
            widen8<Elem>(v_raw[r], v_values);
#pragma unroll
            for (int g = 0; g < G; ++g) {
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    acc[g][i] = fmaf(p[r][g], v_values[i], acc[g][i]);
                }
            }
        }
    }

    // The warp's row positions merged: lanes of one chunk differ in the bits
    // above the row's lanes. An empty state (m = -FLT_MAX, l = 0) weighs 0
    // beside a real one and stays empty beside another empty one.
#pragma unroll
    for (int o = kRowLanes; o < 32; o *= 2) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const float m_other = __shfl_xor_sync(kAllLanes, m[g], o);
            const float l_other = __shfl_xor_sync(kAllLanes, l[g], o);
            const float m_new = fmaxf(m[g], m_other);
            const float mine = exp2f(m[g] - m_new);
            const float theirs = exp2f(m_other - m_new);
            l[g] = l[g] * mine + l_other * theirs;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float acc_other = __shfl_xor_sync(kAllLanes, acc[g][i], o);
                acc[g][i] = acc[g][i] * mine + acc_other * theirs;
            }
            m[g] = m_new;
        }
    }
    if (lane < kRowLanes) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                warp_out[warp][g][chunk * 8 + i] = acc[g][i];
            }
            if (lane == 0) {
                warp_max[warp][g] = m[g];
                warp_sum[warp][g] = l[g];
            }
        }
    }
    __syncthreads();

    // The block's warps merged into the split's partial results, in the
    // general kernel's units: the maximum in natural-log units, so that
    // exp(max) scales the output and the sum as exp2 did here.
    for (int o = static_cast<int>(threadIdx.x); o < group * D; o += kThreads) {
        const int g = o / D;
        const int i = o % D;
        float top = -FLT_MAX;
#pragma unroll
        for (int w = 0; w < kBlockWarps; ++w) {
            top = fmaxf(top, warp_max[w][g]);
        }
        float total = 0.0f;
        float value = 0.0f;
#pragma unroll
        for (int w = 0; w < kBlockWarps; ++w) {
            const float weight = exp2f(warp_max[w][g] - top);
            total += warp_sum[w][g] * weight;
            value += warp_out[w][g][i] * weight;
        }
        const std::size_t at =
            (static_cast<std::size_t>(b.token) * heads + b.first_head + g) * max_splits + b.split;
        workspace.partial_out[at * D + i] = value;
        if (i == 0) {
            workspace.partial_max[at] = top * kLn2;
            workspace.partial_sum[at] = total;
        }
    }
}

// Calls visit(kernel) with the kernel for the cache's element type, head_dim
// and group bucket: the one place run-time shapes become template arguments.
//
// The group is rounded up to a compiled bucket (1, 2, 3, 4, 8): heads past
// the group compute on zero queries and are never written. Registers grow
// with the bucket (about 40 a query head), and with them fewer blocks fit a
// multiprocessor, so common groups get their own (3: SmolLM2's 9 query heads
// over 3 KV heads).
template <typename Elem, int D, typename Visit>
void dispatch_group(int group, Visit&& visit) {
    if (group <= 1) {
        visit(vector_attention_split_kernel<Elem, D, 1>);
    } else if (group <= 2) {
        visit(vector_attention_split_kernel<Elem, D, 2>);
    } else if (group <= 3) {
        visit(vector_attention_split_kernel<Elem, D, 3>);
    } else if (group <= 4) {
        visit(vector_attention_split_kernel<Elem, D, 4>);
    } else {
        visit(vector_attention_split_kernel<Elem, D, 8>);
    }
}

template <typename Elem, typename Visit>
void dispatch_head_dim(int head_dim, int group, Visit&& visit) {
    switch (head_dim) {
    case 32:
        dispatch_group<Elem, 32>(group, visit);
        return;
    case 64:
        dispatch_group<Elem, 64>(group, visit);
        return;
    case 128:
        dispatch_group<Elem, 128>(group, visit);
        return;
    case 256:
        dispatch_group<Elem, 256>(group, visit);
        return;
    default:
        throw std::invalid_argument("vector attention: no kernel for head_dim " +
                                    std::to_string(head_dim));
    }
}

template <typename Visit>
void dispatch(const PagedKvView& cache, int heads, Visit&& visit) {
    const int group = heads / cache.kv_heads;
    if (cache.keys.format == kv::KvFormat::f16) {
        dispatch_head_dim<__half>(cache.head_dim, group, visit);
    } else {
        dispatch_head_dim<__nv_bfloat16>(cache.head_dim, group, visit);
    }
}

bool aligned16(const void* pointer) {
    return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

bool vector_attention_fits(const PagedKvView& cache, int heads) {
    const kv::KvFormat format = cache.keys.format;
    if ((format != kv::KvFormat::f16 && format != kv::KvFormat::bf16) ||
        cache.values.format != format) {
        return false;
    }
    if (cache.head_dim != 32 && cache.head_dim != 64 && cache.head_dim != 128 &&
        cache.head_dim != 256) {
        return false;
    }
    if (cache.kv_heads <= 0 || heads % cache.kv_heads != 0 || heads / cache.kv_heads > 8) {
        return false;
    }
    return aligned16(cache.keys.data) && aligned16(cache.values.data) &&
           cache.keys.row_bytes % 16 == 0 && cache.values.row_bytes % 16 == 0 &&
           cache.keys.head_block_bytes % 16 == 0 && cache.values.head_block_bytes % 16 == 0;
}

int vector_attention_resident_blocks(const PagedKvView& cache, int heads) {
    if (!vector_attention_fits(cache, heads)) {
        return 0;
    }
    // The kernel launch_vector_attention_splits would run: found through the
    // same dispatch, asked instead of launched.
    int blocks = 0;
    const auto ask = [&blocks](auto kernel) {
        KVSCOPE_CUDA_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, 0));
    };
    dispatch(cache, heads, ask);
    return blocks;
}

void launch_vector_attention_splits(const PagedKvView& cache, const DeviceBatchView& batch,
                                    const float* q, int heads, float scale, int max_splits,
                                    const AttentionWorkspace& workspace, cudaStream_t stream) {
    if (!vector_attention_fits(cache, heads)) {
        throw std::invalid_argument("vector attention: this cache does not fit the vector path");
    }
    if (!aligned16(q)) {
        throw std::invalid_argument("vector attention: the queries must be 16-byte aligned");
    }
    const dim3 grid(static_cast<unsigned>(batch.tokens), static_cast<unsigned>(cache.kv_heads),
                    static_cast<unsigned>(max_splits));
    dispatch(cache, heads, [&](auto kernel) {
        kernel<<<grid, kThreads, 0, stream>>>(cache, batch, q, heads, scale, max_splits, workspace);
        KVSCOPE_CHECK_LAUNCH("vector_attention_split_kernel");
    });
}

} // namespace kvscope::kernels
