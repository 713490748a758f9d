#include "kernels/attention_scores.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/math/kv_codec_math.h"
#include "kernels/math/paged_slots.h"
#include "kernels/math/ring_tile.h"
#include "kernels/math/row_chunk_decode.h"
#include "kernels/vector_attention.cuh"
#include "kernels/wide_row_fetch.h"

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

// Where a lane's rows of a tile come from. A lane reads 8 values (chunk) of
// kRowLoads rows of K and of V per tile; a policy fetches the tile's rows
// (told which tile the warp takes next, which the ring starts copying), then
// hands out each row's 8 values as floats. Rows past the split must come out
// as zeros (never NaN), since they are weighed by 0.
//
// 16-bit rows (WideRowFetch::registers): one 16-byte load per row and lane,
// straight into registers, every load of the tile issued before any is used.
template <typename Elem, int D>
struct DirectRows {
    static constexpr int kSharedWords = 1; // per warp: none needed
    uint4 k_raw[kRowLoads];
    uint4 v_raw[kRowLoads];

    __device__ void start(const PagedKvView&, const SplitBlock&, int, int, std::uint32_t*) {}

    __device__ void fetch(const PagedKvView& cache, const SplitBlock& b, int tile,
                          int /*next_tile*/, int load_row, int chunk, int load_rows, int /*lane*/,
                          std::uint32_t* /*stage*/, bool (&valid)[kRowLoads]) {
#pragma unroll
        for (int r = 0; r < kRowLoads; ++r) {
            const int j = tile + r * load_rows + load_row;
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
                k_raw[r] = __ldg(reinterpret_cast<const uint4*>(cache.keys.data + k_at));
                v_raw[r] = __ldg(reinterpret_cast<const uint4*>(cache.values.data + v_at));
            }
        }
    }
    __device__ void key(int r, float (&out)[8]) const {
        widen8<Elem>(k_raw[r], out);
    }
    __device__ void value(int r, float (&out)[8]) const {
        widen8<Elem>(v_raw[r], out);
    }
};

// Asynchronous copies from global to shared memory (cp.async, compute
// capability 8.0 and later: every target the build names by default): the
// copy is issued and the thread goes on; commit_group closes the copies
// issued so far into a group, wait_group<N> waits until at most N groups are
// still in flight. A copy with fill false writes zeros and reads nothing
// (`src` must still point into the pool). 16-byte copies bypass L1 (.cg: K
// and V are read once). Built for an older target (CMAKE_CUDA_ARCHITECTURES
// below 80), the copies are plain loads and stores, done when issued.
template <int Bytes>
__device__ inline void copy_async(std::uint32_t* shared_dst, const std::uint8_t* src, bool fill) {
    static_assert(Bytes == 4 || Bytes == 16, "cp.async copies 4 or 16 bytes here");
#if __CUDA_ARCH__ >= 800
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
    const std::size_t global = __cvta_generic_to_global(src);
    const int src_bytes = fill ? Bytes : 0;
    if constexpr (Bytes == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global),
                     "r"(src_bytes)
                     : "memory");
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(global),
                     "r"(src_bytes)
                     : "memory");
    }
#else
    if constexpr (Bytes == 16) {
        *reinterpret_cast<uint4*>(shared_dst) =
            fill ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
    } else {
        *shared_dst = fill ? *reinterpret_cast<const std::uint32_t*>(src) : 0u;
    }
#endif
}
__device__ inline void commit_copies() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int InFlight>
__device__ inline void wait_for_copies() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(InFlight) : "memory");
#endif
}

// How a lane turns its 8 values of a row in shared memory into floats, and
// the pieces the ring copies a row in.
// 16-bit rows (16-byte aligned in the pool: vector_attention_fits): 16-byte
// copies, one 16-byte shared load per lane, widened exactly.
template <typename Elem, int D>
struct WideRowCodec {
    static constexpr int kRowBytes = 2 * D;
    static constexpr int kCopyBytes = 16;
    __device__ static void decode8(const std::uint8_t* row, int chunk, float (&out)[8]) {
        widen8<Elem>(*reinterpret_cast<const uint4*>(row + chunk * 16), out);
    }
};
// Quantised per-token rows (q8_0, q4_0, fp8 e4m3; only 4-byte aligned, a
// q8_0 row of 64 is 68 bytes): 4-byte copies row by row (16-byte ones for
// whole tiles), a lane's 8 values decoded at
// once (math::decode_row_chunk: the element decoder's values, one scale read
// and the codes widened without integer conversions).
template <kv::KvFormat Format, int D>
struct QuantisedRowCodec {
    static_assert(math::kChunkValues == 8, "a lane decodes 8 values of a row");
    static constexpr int kRowBytes = static_cast<int>(math::row_bytes(Format, D, false));
    static constexpr int kCopyBytes = 4;
    __device__ static void decode8(const std::uint8_t* row, int chunk, float (&out)[8]) {
        math::decode_row_chunk<Format>(row, chunk, out);
    }
};

// Rows copied asynchronously through a ring of two tiles per warp in shared
// memory: while the warp computes one tile, the next one's K and V rows are
// landing. A tile is kTileRows consecutive cache entries; every lane copies
// consecutive pieces of them (coalesced): 16 bytes at a time from the first
// row where the tile's rows lie end to end in the pool (ring_tile.h's whole
// tiles), else row by row, with rows past the split zero-filled, which every
// format decodes to 0.
//
// start() issues the warp's first tile. The order in fetch: every lane has
// finished reading the slot the next tile goes to (the tile before this one;
// __syncwarp), then the next tile's copies are issued and committed (a
// group, empty past the split), then each lane waits for all but that newest
// group (its copies of this tile) and the warp meets again (__syncwarp) so
// the other lanes' copies are seen too. So the values, and their order, are
// those DirectRows reads: the same bits for the same split length.
template <typename Codec, int D>
struct RingRows {
    static constexpr int kRowBytes = Codec::kRowBytes;
    static constexpr int kTileRows = (32 / (D / 8)) * kRowLoads;
    using Layout = math::RingTileLayout<kRowBytes, Codec::kCopyBytes, kTileRows>;
    static constexpr int kPlaneWords = Layout::kPlaneWords;
    static constexpr int kSlotWords = Layout::kSlotWords;
    static constexpr int kSharedWords = Layout::kRingWords;
    const std::uint8_t* stage = nullptr; // the slot of the tile being computed
    int slot = 0;
    int load_row = 0;
    int chunk = 0;
    int load_rows = 0;

    // Issues the copies of the tile at `tile` into `slot_words` and commits
    // them. Lane r finds where row r sits in a plane (one block-table read a
    // row; K and V blocks are the same size: vector_attention_fits), and
    // each copy takes its row's place from that lane.
    __device__ static void copy_tile(const PagedKvView& cache, const SplitBlock& b, int tile,
                                     int lane, std::uint32_t* slot_words) {
        std::int64_t lane_row_at = 0;
        if (lane < kTileRows && tile + lane < b.n) {
            lane_row_at =
                math::entry_row_offset(b.table, b.begin + tile + lane, cache.block_size, b.kv_head,
                                       cache.kv_heads, cache.keys.head_block_bytes, kRowBytes);
        }
        // A whole tile (every row in the split, end to end in the pool) in
        // 16-byte copies from its first row on (ring_tile.h). Uniform over
        // the warp: every lane has the same rows' places.
        const std::int64_t first_at = __shfl_sync(kAllLanes, lane_row_at, 0);
        const std::int64_t last_at = __shfl_sync(kAllLanes, lane_row_at, kTileRows - 1);
        const bool pool_aligned = ((reinterpret_cast<std::uintptr_t>(cache.keys.data) |
                                    reinterpret_cast<std::uintptr_t>(cache.values.data)) %
                                   16) == 0;
        if (Layout::whole(b.n - tile, pool_aligned, first_at, last_at, cache.block_size)) {
#pragma unroll
            for (int c = 0; c < Layout::kWholeCopiesPerLane; ++c) {
                const int byte = Layout::whole_copy_byte(lane, c);
                if (byte < Layout::kTileBytes) {
                    copy_async<16>(slot_words + byte / 4, cache.keys.data + first_at + byte, true);
                    copy_async<16>(slot_words + kPlaneWords + byte / 4,
                                   cache.values.data + first_at + byte, true);
                }
            }
            commit_copies();
            return;
        }
#pragma unroll
        for (int c = 0; c < Layout::kCopiesPerLane; ++c) {
            const math::RingPiece piece = Layout::piece(lane, c);
            // Every lane takes part in the shuffle, lanes without a copy too.
            const std::int64_t row_at = __shfl_sync(kAllLanes, lane_row_at, piece.row % 32);
            if (piece.exists) {
                const bool live = tile + piece.row < b.n;
                const std::int64_t at = live ? row_at + piece.byte : 0;
                copy_async<Codec::kCopyBytes>(slot_words + piece.word, cache.keys.data + at, live);
                copy_async<Codec::kCopyBytes>(slot_words + kPlaneWords + piece.word,
                                              cache.values.data + at, live);
            }
        }
        commit_copies();
    }

    __device__ void start(const PagedKvView& cache, const SplitBlock& b, int first_tile, int lane,
                          std::uint32_t* warp_stage) {
        if (first_tile < b.n) {
            copy_tile(cache, b, first_tile, lane, warp_stage);
        }
    }

    __device__ void fetch(const PagedKvView& cache, const SplitBlock& b, int tile, int next_tile,
                          int load_row_, int chunk_, int load_rows_, int lane,
                          std::uint32_t* warp_stage, bool (&valid)[kRowLoads]) {
        load_row = load_row_;
        chunk = chunk_;
        load_rows = load_rows_;
        __syncwarp(); // the other slot's rows (the tile before) are read by every lane
        if (next_tile < b.n) {
            copy_tile(cache, b, next_tile, lane, warp_stage + (slot ^ 1) * kSlotWords);
        } else {
            commit_copies(); // an empty group: "all but the newest" is still this tile
        }
        wait_for_copies<1>();
        __syncwarp();
        stage = reinterpret_cast<const std::uint8_t*>(warp_stage + slot * kSlotWords);
        slot ^= 1;
#pragma unroll
        for (int r = 0; r < kRowLoads; ++r) {
            valid[r] = tile + r * load_rows + load_row < b.n;
        }
    }
    __device__ const std::uint8_t* row(int plane, int r) const {
        return stage + plane * kPlaneWords * 4 + Layout::row_start(r * load_rows + load_row);
    }
    __device__ void key(int r, float (&out)[8]) const {
        Codec::decode8(row(0, r), chunk, out);
    }
    __device__ void value(int r, float (&out)[8]) const {
        Codec::decode8(row(1, r), chunk, out);
    }
};

// Grid (tokens, kv_heads, splits), as the general split kernel's; writes the
// same partial output, maximum and sum per query head of the group.
//
// Lane layout: a row of D 16-bit values is D / 8 chunks of 16 bytes; kRowLanes
// lanes share a row, chunk = lane % kRowLanes, and a warp covers kLoadRows
// rows per load. Each lane keeps the online softmax state of the rows it saw
// (all lanes of a row hold the same scores after the row's reduction), so no
// exchange happens inside the loop; the states of a warp's row positions, then
// of the block's warps, are merged once at the end.
template <typename Rows, int D, int G>
__global__ void __launch_bounds__(kThreads)
    vector_attention_split_kernel(PagedKvView cache, DeviceBatchView batch,
                                  const float* __restrict__ q, int heads, float scale,
                                  int max_splits, AttentionWorkspace workspace) {
    constexpr int kRowLanes = D / 8;
    constexpr int kLoadRows = 32 / kRowLanes;
    constexpr int kTileRows = kLoadRows * kRowLoads;
    static_assert(D % 8 == 0 && 32 % kRowLanes == 0, "a row must split into a warp's lanes");
    // Per warp: its rows while it runs its tiles (RingRows), then its partial
    // output, once the rows are done with: the two share the space.
    constexpr int kWarpWords = Rows::kSharedWords > G * D ? Rows::kSharedWords : G * D;
    static_assert(kWarpWords % 4 == 0, "each warp's space must start 16-byte aligned");
    __shared__ alignas(16) std::uint32_t warp_space[kBlockWarps][kWarpWords];
    __shared__ float warp_max[kBlockWarps][G];
    __shared__ float warp_sum[kBlockWarps][G];

    wait_for_previous_kernel();
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

    Rows rows;
    rows.start(cache, b, warp * kTileRows, lane, warp_space[warp]);
    for (int tile = warp * kTileRows; tile < b.n; tile += kBlockWarps * kTileRows) {
        // Every load of the tile first, then the arithmetic.
        bool valid[kRowLoads];
        rows.fetch(cache, b, tile, tile + kBlockWarps * kTileRows, load_row, chunk, kLoadRows, lane,
                   warp_space[warp], valid);
        // Scores of the tile's rows, summed over each row's lanes.
        float p[kRowLoads][G];
#pragma unroll
        for (int r = 0; r < kRowLoads; ++r) {
            float k_values[8];
            rows.key(r, k_values);
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
            rows.value(r, v_values);
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
    // The warp's space becomes its output: no copy may still land in it (the
    // last tile's group was empty), and every lane is done reading its rows.
    wait_for_copies<0>();
    __syncwarp();
    float* const warp_out = reinterpret_cast<float*>(warp_space[warp]);
    if (lane < kRowLanes) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                warp_out[g * D + chunk * 8 + i] = acc[g][i];
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
            value += reinterpret_cast<const float*>(warp_space[w])[g * D + i] * weight;
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

template <typename Rows, int D, typename Visit>
void dispatch_group(int group, Visit&& visit) {
    if (group <= 1) {
        visit(vector_attention_split_kernel<Rows, D, 1>);
    } else if (group <= 2) {
        visit(vector_attention_split_kernel<Rows, D, 2>);
    } else if (group <= 3) {
        visit(vector_attention_split_kernel<Rows, D, 3>);
    } else if (group <= 4) {
        visit(vector_attention_split_kernel<Rows, D, 4>);
    } else {
        visit(vector_attention_split_kernel<Rows, D, 8>);
    }
}

// 16-bit rows of one head_dim: into registers, or through the ring.
template <typename Elem, int D, typename Visit>
void dispatch_wide_rows(int group, Visit&& visit) {
    if (wide_row_fetch() == WideRowFetch::ring) {
        dispatch_group<RingRows<WideRowCodec<Elem, D>, D>, D>(group, visit);
    } else {
        dispatch_group<DirectRows<Elem, D>, D>(group, visit);
    }
}

// 16-bit caches: head_dim 32, 64, 128 or 256.
template <typename Elem, typename Visit>
void dispatch_wide(int head_dim, int group, Visit&& visit) {
    switch (head_dim) {
    case 32:
        dispatch_wide_rows<Elem, 32>(group, visit);
        return;
    case 64:
        dispatch_wide_rows<Elem, 64>(group, visit);
        return;
    case 128:
        dispatch_wide_rows<Elem, 128>(group, visit);
        return;
    case 256:
        dispatch_wide_rows<Elem, 256>(group, visit);
        return;
    default:
        throw std::invalid_argument("vector attention: no kernel for head_dim " +
                                    std::to_string(head_dim));
    }
}

// Quantised per-token caches: head_dim 64 or 128 (the kernels compiled).
template <kv::KvFormat Format, typename Visit>
void dispatch_quantised(int head_dim, int group, Visit&& visit) {
    if (head_dim == 64) {
        dispatch_group<RingRows<QuantisedRowCodec<Format, 64>, 64>, 64>(group, visit);
    } else if (head_dim == 128) {
        dispatch_group<RingRows<QuantisedRowCodec<Format, 128>, 128>, 128>(group, visit);
    } else {
        throw std::invalid_argument("vector attention: no quantised kernel for head_dim " +
                                    std::to_string(head_dim));
    }
}

// Calls visit(kernel) with the kernel for the cache's format, head_dim and
// group bucket: the one place run-time shapes become template arguments.
//
// The group is rounded up to a compiled bucket (1, 2, 3, 4, 8): heads past
// the group compute on zero queries and are never written. Registers grow
// with the bucket (about 40 a query head), and with them fewer blocks fit a
// multiprocessor, so common groups get their own (3: SmolLM2's 9 query heads
// over 3 KV heads).
template <typename Visit>
void dispatch(const PagedKvView& cache, int heads, Visit&& visit) {
    const int group = heads / cache.kv_heads;
    switch (cache.keys.format) {
    case kv::KvFormat::f16:
        return dispatch_wide<__half>(cache.head_dim, group, visit);
    case kv::KvFormat::bf16:
        return dispatch_wide<__nv_bfloat16>(cache.head_dim, group, visit);
    case kv::KvFormat::q8_0:
        return dispatch_quantised<kv::KvFormat::q8_0>(cache.head_dim, group, visit);
    case kv::KvFormat::q4_0:
        return dispatch_quantised<kv::KvFormat::q4_0>(cache.head_dim, group, visit);
    case kv::KvFormat::fp8_e4m3:
        return dispatch_quantised<kv::KvFormat::fp8_e4m3>(cache.head_dim, group, visit);
    default:
        throw std::invalid_argument("vector attention: no kernel for this KV format");
    }
}

bool aligned16(const void* pointer) {
    return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

bool vector_attention_fits(const PagedKvView& cache, int heads) {
    const kv::KvFormat format = cache.keys.format;
    if (cache.values.format != format || cache.kv_heads <= 0 || heads % cache.kv_heads != 0 ||
        heads / cache.kv_heads > 8) {
        return false;
    }
    const int d = cache.head_dim;
    if (format == kv::KvFormat::f16 || format == kv::KvFormat::bf16) {
        // Rows of exactly 2 * head_dim bytes (the ring's tiles are sized so),
        // K and V blocks alike (the ring finds a row's place once for both).
        return (d == 32 || d == 64 || d == 128 || d == 256) && aligned16(cache.keys.data) &&
               aligned16(cache.values.data) && cache.keys.row_bytes == 2 * d &&
               cache.values.row_bytes == 2 * d && cache.keys.head_block_bytes % 16 == 0 &&
               cache.values.head_block_bytes == cache.keys.head_block_bytes;
    }
    if (math::has_chunk_decoder(format)) { // the formats dispatch_quantised compiles
        const auto aligned4 = [](const void* pointer) {
            return reinterpret_cast<std::uintptr_t>(pointer) % 4 == 0;
        };
        return (d == 64 || d == 128) && aligned4(cache.keys.data) && aligned4(cache.values.data) &&
               cache.keys.row_bytes == math::row_bytes(format, d, false) &&
               cache.values.row_bytes == cache.keys.row_bytes && cache.keys.row_bytes % 4 == 0 &&
               cache.keys.head_block_bytes % 4 == 0 &&
               cache.values.head_block_bytes == cache.keys.head_block_bytes;
    }
    return false;
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
    if (batch.per_token_rows() <= 0 || max_splits <= 0) {
        return; // a tiled step of no single tokens
    }
    const dim3 grid(static_cast<unsigned>(batch.per_token_rows()),
                    static_cast<unsigned>(cache.kv_heads), static_cast<unsigned>(max_splits));
    dispatch(cache, heads, [&](auto kernel) {
        launch_kernel("vector_attention_split_kernel", kernel, grid, dim3(kThreads), 0, stream,
                      cache, batch, q, heads, scale, max_splits, workspace);
    });
}

} // namespace kvscope::kernels
