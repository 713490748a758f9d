#include "kernels/activation_overflow.h"
#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/half_store.cuh"
#include "kernels/math/mma_fragments.h"
#include "kernels/math/paged_slots.h"
#include "kernels/tensor_core_mma.cuh"
#include "kernels/tensor_cores.h"
#include "kernels/tile_attention.cuh"

#include <climits>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdexcept>
#include <string>

namespace kvscope::kernels {

// ---- Kernel -------------------------------------------------------------------

namespace {

constexpr int kKeyTile = 64;    // cache entries staged in shared memory per iteration
constexpr int kWarpTokens = 16; // a warp's rows: mma's M, one query head's tokens
constexpr int kMaxTileWarps = 8;
constexpr int kMaxTileTokens = 64; // tile_attention_tile_tokens' largest
// 16-bit values past each staged row, so the rows start 16 bytes apart in
// the banks: a warp's fragment loads (8 rows x 4 words) then hit 32
// different banks.
constexpr int kRowPad = 8;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kAllLanes = 0xffffffffu;

__device__ inline int warp_min_int(int x) {
    for (int offset = 16; offset > 0; offset /= 2) {
        x = min(x, __shfl_xor_sync(kAllLanes, x, offset));
    }
    return x;
}
__device__ inline int warp_max_int(int x) {
    for (int offset = 16; offset > 0; offset /= 2) {
        x = max(x, __shfl_xor_sync(kAllLanes, x, offset));
    }
    return x;
}
// Over the 4 lanes of a group, which hold the same two rows of a C tile.
__device__ inline float group_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(kAllLanes, x, 1));
    return fmaxf(x, __shfl_xor_sync(kAllLanes, x, 2));
}
__device__ inline float group_sum(float x) {
    x += __shfl_xor_sync(kAllLanes, x, 1);
    return x + __shfl_xor_sync(kAllLanes, x, 2);
}

// Grid (query tiles, kv_heads, splits); group * tile_tokens / 16 warps.
// Warp w computes query head (w % group) of the KV head's group for the
// tile's tokens 16 * (w / group) onwards. A lane holds two rows of every
// C tile (mma::c_element): value v's row is lane / 4 + 8 * (v / 2), so
// `half` h below (0, 1) names the lane's row lane / 4 + 8 * h.
//
// Scores are kept in log2 units (scaled by log2 e, so exp2 is the
// exponential); the partial maximum is written in natural units, as the
// merge and the vector path's split kernel use.
template <typename Elem, int D, typename Out>
__global__ void __launch_bounds__(kMaxTileWarps * 32)
    tile_attention_kernel(PagedKvView cache, DeviceBatchView batch, const float* __restrict__ q,
                          int heads, float scale, int max_splits, AttentionWorkspace workspace,
                          Out* __restrict__ out, bool direct, unsigned int* overflows) {
    using Core = TensorCore<Elem>;
    constexpr int kStride = D + kRowPad;       // 16-bit values from one staged row to the next
    constexpr int kSteps = D / 16;             // K steps of the scores
    constexpr int kKeyTiles = kKeyTile / 8;    // N tiles of the scores
    constexpr int kValueSteps = kKeyTile / 16; // K steps of the output
    constexpr int kOutTiles = D / 8;           // N tiles of the output
    constexpr int kPieces = D / 8;             // 16-byte pieces of a row
    extern __shared__ uint4 tile_shared[];
    auto* keys = reinterpret_cast<std::uint16_t*>(tile_shared); // (kKeyTile, kStride)
    std::uint16_t* values = keys + kKeyTile * kStride;
    __shared__ int row_begin[kMaxTileTokens]; // each token's entries in this split
    __shared__ int row_end[kMaxTileTokens];
    __shared__ int block_span[2];

    wait_for_previous_kernel();
    const int split = static_cast<int>(blockIdx.z);
    const int kv_head = static_cast<int>(blockIdx.y);
    const int first_token = batch.query_tile_bounds[2 * blockIdx.x];
    const int tile_tokens = batch.query_tile_bounds[2 * blockIdx.x + 1] - first_token;
    const int group = heads / cache.kv_heads;
    const int length = workspace.split;
    const std::int32_t* table = batch.table_of(batch.sequence_of[first_token]);

    // Each token's share of the split: its attended entries (a sliding
    // window's from its oldest, as split_block cuts them), `length` at a
    // time; empty past its context, and for rows past the tile.
    for (int r = static_cast<int>(threadIdx.x); r < kMaxTileTokens;
         r += static_cast<int>(blockDim.x)) {
        math::EntryRange entries{0, 0};
        if (r < tile_tokens) {
            entries = math::split_entries(batch.cache_positions[first_token + r] + 1, cache.window,
                                          split, length);
        }
        row_begin[r] = entries.begin;
        row_end[r] = entries.end;
    }
    __syncthreads();
    if (threadIdx.x == 0) { // the entries any token of the tile attends here
        int lo = INT_MAX;
        int hi = INT_MIN;
        for (int r = 0; r < tile_tokens; ++r) {
            if (row_end[r] > row_begin[r]) {
                lo = min(lo, row_begin[r]);
                hi = max(hi, row_end[r]);
            }
        }
        block_span[0] = lo;
        block_span[1] = hi;
    }
    __syncthreads();
    const int lo = block_span[0];
    const int hi = block_span[1];
    if (lo >= hi) {
        return; // past every token's context: the merge reads no such split
    }

    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int head = kv_head * group + warp % group;
    const int warp_first = (warp / group) * kWarpTokens; // the warp's first row in the tile
    int begin[2];
    int end[2];
    int warp_lo = INT_MAX;
    int warp_hi = INT_MIN;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = warp_first + math::mma::c_element(lane, 2 * h).row;
        begin[h] = row_begin[r];
        end[h] = row_end[r];
        if (end[h] > begin[h]) {
            warp_lo = min(warp_lo, begin[h]);
            warp_hi = max(warp_hi, end[h]);
        }
    }
    warp_lo = warp_min_int(warp_lo);
    warp_hi = warp_max_int(warp_hi);

    // The warp's queries as A fragments, rounded to the cache's type once.
    std::uint32_t query[kSteps][4];
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
#pragma unroll
        for (int reg = 0; reg < 4; ++reg) {
            const math::mma::Element at = math::mma::a_element(lane, reg, 0);
            const int r = warp_first + at.row;
            float2 pair = make_float2(0.0f, 0.0f);
            if (r < tile_tokens) {
                pair = *reinterpret_cast<const float2*>(
                    q + (static_cast<std::int64_t>(first_token + r) * heads + head) * D +
                    step * 16 + at.col);
            }
            query[step][reg] = Core::pack(pair.x, pair.y);
        }
    }

    float acc[kOutTiles][4] = {};
    float row_max[2] = {-INFINITY, -INFINITY};
    float row_sum[2] = {0.0f, 0.0f}; // this lane's share; the group's summed at the end
    const float score_scale = scale * kLog2e;
    for (int base = lo; base < hi; base += kKeyTile) {
        __syncthreads(); // every warp is done with the previous tile's rows
        // Entries past the span are zeros, never stale rows: their
        // probabilities are 0, and 0 times a NaN left there would be NaN.
        for (int i = static_cast<int>(threadIdx.x); i < kKeyTile * kPieces;
             i += static_cast<int>(blockDim.x)) {
            const int row = i / kPieces;
            const int piece = i % kPieces;
            const int entry = base + row;
            uint4 k = make_uint4(0, 0, 0, 0);
            uint4 v = k;
            if (entry < hi) {
                // K and V rows sit at the same offsets (tile_attention_fits).
                const std::int64_t at =
                    math::entry_row_offset(table, entry, cache.block_size, kv_head, cache.kv_heads,
                                           cache.keys.head_block_bytes, cache.keys.row_bytes) +
                    piece * 16;
                k = __ldg(reinterpret_cast<const uint4*>(cache.keys.data + at));
                v = __ldg(reinterpret_cast<const uint4*>(cache.values.data + at));
            }
            *reinterpret_cast<uint4*>(keys + row * kStride + piece * 8) = k;
            *reinterpret_cast<uint4*>(values + row * kStride + piece * 8) = v;
        }
        __syncthreads();
        if (base >= warp_hi || base + kKeyTile <= warp_lo) {
            continue; // none of these entries is in the warp's rows' ranges
        }

        // Scores of the warp's 16 rows against the 64 entries: B's rows are
        // the head's dimensions, its columns the entries (a key row read
        // along its dimensions).
        float score[kKeyTiles][4] = {};
#pragma unroll
        for (int step = 0; step < kSteps; ++step) {
#pragma unroll
            for (int j = 0; j < kKeyTiles; ++j) {
                std::uint32_t b[2];
#pragma unroll
                for (int reg = 0; reg < 2; ++reg) {
                    const math::mma::Element at = math::mma::b_element(lane, reg, 0);
                    b[reg] = *reinterpret_cast<const std::uint32_t*>(
                        keys + (j * 8 + at.col) * kStride + step * 16 + at.row);
                }
                Core::mma(score[j], query[step], b[0], b[1]);
            }
        }

        // Each row's own entries only; the running maximum and sum, and the
        // output so far rescaled to the new maximum.
        float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
            for (int v = 0; v < 4; ++v) {
                const int h = v / 2;
                const int entry = base + j * 8 + math::mma::c_element(lane, v).col;
                const bool attended = entry >= begin[h] && entry < end[h];
                score[j][v] = attended ? score[j][v] * score_scale : -INFINITY;
                tile_max[h] = fmaxf(tile_max[h], score[j][v]);
            }
        }
        float offset[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float next = fmaxf(row_max[h], group_max(tile_max[h]));
            // A row with nothing attended yet keeps zeros (and -inf); one
            // whose first entries come now scales its zeros by exp2(-inf) = 0.
            const float rescale = next == -INFINITY ? 1.0f : exp2f(row_max[h] - next);
            offset[h] = next == -INFINITY ? 0.0f : next;
            row_max[h] = next;
            row_sum[h] *= rescale;
#pragma unroll
            for (int n = 0; n < kOutTiles; ++n) {
                acc[n][2 * h] *= rescale;
                acc[n][2 * h + 1] *= rescale;
            }
        }
#pragma unroll
        for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
            for (int v = 0; v < 4; ++v) {
                const float p = exp2f(score[j][v] - offset[v / 2]); // masked: exp2(-inf) = 0
                score[j][v] = p;
                row_sum[v / 2] += p;
            }
        }

        // out += P V: the probabilities' accumulators are already A
        // fragments (mma::a_from_accumulators); B's rows are the entries,
        // its columns the head's dimensions (a value column read down the
        // staged rows, two entries a register).
#pragma unroll
        for (int step = 0; step < kValueSteps; ++step) {
            std::uint32_t p[4];
#pragma unroll
            for (int reg = 0; reg < 4; ++reg) {
                const math::mma::AccumulatorSource low = math::mma::a_from_accumulators(reg, 0);
                const math::mma::AccumulatorSource high = math::mma::a_from_accumulators(reg, 1);
                p[reg] = Core::pack(score[2 * step + low.tile][low.value],
                                    score[2 * step + high.tile][high.value]);
            }
#pragma unroll
            for (int n = 0; n < kOutTiles; ++n) {
                std::uint32_t b[2];
#pragma unroll
                for (int reg = 0; reg < 2; ++reg) {
                    const math::mma::Element low = math::mma::b_element(lane, reg, 0);
                    const math::mma::Element high = math::mma::b_element(lane, reg, 1);
                    b[reg] = static_cast<std::uint32_t>(
                                 values[(step * 16 + low.row) * kStride + n * 8 + low.col]) |
                             static_cast<std::uint32_t>(
                                 values[(step * 16 + high.row) * kStride + n * 8 + high.col])
                                 << 16;
                }
                Core::mma(acc[n], p, b[0], b[1]);
            }
        }
    }

    // Every lane takes part in both sums before any lane branches below.
    row_sum[0] = group_sum(row_sum[0]);
    row_sum[1] = group_sum(row_sum[1]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (end[h] <= begin[h]) {
            continue; // no entry of this split (or no token) in this row
        }
        const int r = warp_first + math::mma::c_element(lane, 2 * h).row;
        const std::int64_t row = static_cast<std::int64_t>(first_token + r) * heads + head;
        const bool writes_totals = lane % 4 == 0; // one lane of the group
        if (direct) {                             // the only split: the attention itself
            const float inverse = 1.0f / row_sum[h];
#pragma unroll
            for (int n = 0; n < kOutTiles; ++n) {
                const int col = n * 8 + math::mma::c_element(lane, 2 * h).col;
                store_activation(out + row * D + col, acc[n][2 * h] * inverse, overflows);
                store_activation(out + row * D + col + 1, acc[n][2 * h + 1] * inverse, overflows);
            }
            if (writes_totals) {
                workspace.lse_max[row] = row_max[h] * kLn2;
                workspace.lse_sum[row] = row_sum[h];
            }
            continue;
        }
        const std::int64_t at = row * max_splits + split;
#pragma unroll
        for (int n = 0; n < kOutTiles; ++n) {
            const int col = n * 8 + math::mma::c_element(lane, 2 * h).col;
            *reinterpret_cast<float2*>(workspace.partial_out + at * D + col) =
                make_float2(acc[n][2 * h], acc[n][2 * h + 1]);
        }
        if (writes_totals) {
            workspace.partial_max[at] = row_max[h] * kLn2;
            workspace.partial_sum[at] = row_sum[h];
        }
    }
}

constexpr std::size_t shared_bytes(int head_dim) {
    return 2 * static_cast<std::size_t>(kKeyTile) * (head_dim + kRowPad) * sizeof(std::uint16_t);
}

// Calls visit(kernel, head_dim) with the kernel for the cache's type and
// head_dim: the one place run-time shapes become template arguments.
template <typename Out, typename Visit>
void dispatch(const PagedKvView& cache, Visit&& visit) {
    const bool bf16 = cache.keys.format == kv::KvFormat::bf16;
    switch (cache.head_dim) {
    case 32:
        return bf16 ? visit(tile_attention_kernel<__nv_bfloat16, 32, Out>, 32)
                    : visit(tile_attention_kernel<__half, 32, Out>, 32);
    case 64:
        return bf16 ? visit(tile_attention_kernel<__nv_bfloat16, 64, Out>, 64)
                    : visit(tile_attention_kernel<__half, 64, Out>, 64);
    case 128:
        return bf16 ? visit(tile_attention_kernel<__nv_bfloat16, 128, Out>, 128)
                    : visit(tile_attention_kernel<__half, 128, Out>, 128);
    default:
        throw std::invalid_argument("tile attention: no kernel for head_dim " +
                                    std::to_string(cache.head_dim));
    }
}

bool aligned16(const void* pointer) {
    return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

template <typename Out>
bool launch(const PagedKvView& cache, const DeviceBatchView& batch, const float* q, int heads,
            float scale, int max_splits, const AttentionWorkspace& workspace, Out* out,
            cudaStream_t stream) {
    if (!tile_attention_fits(cache, heads)) {
        throw std::invalid_argument("tile attention: this cache does not fit the tile path");
    }
    if (!aligned16(q)) {
        throw std::invalid_argument("tile attention: the queries must be 16-byte aligned");
    }
    const int group = heads / cache.kv_heads;
    const int tile_tokens = tile_attention_tile_tokens(group);
    if (batch.query_tile_tokens != tile_tokens) {
        throw std::invalid_argument("tile attention: tiles of " +
                                    std::to_string(batch.query_tile_tokens) +
                                    " tokens; this group of " + std::to_string(group) +
                                    " query heads takes tiles of " + std::to_string(tile_tokens));
    }
    if (batch.query_tiles <= 0 || max_splits <= 0) {
        return false;
    }
    // The only split and no untiled tokens: no merge, the tiles write the
    // output themselves.
    const bool direct = max_splits == 1 && batch.untiled_count == 0;
    const dim3 grid(static_cast<unsigned>(batch.query_tiles), static_cast<unsigned>(cache.kv_heads),
                    static_cast<unsigned>(max_splits));
    const dim3 block(static_cast<unsigned>(32 * group * (tile_tokens / kWarpTokens)));
    dispatch<Out>(cache, [&](auto kernel, int head_dim) {
        launch_kernel("tile_attention_kernel", kernel, grid, block, shared_bytes(head_dim), stream,
                      cache, batch, q, heads, scale, max_splits, workspace, out, direct,
                      activation_overflow_counter());
    });
    return direct;
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

bool tile_attention_fits(const PagedKvView& cache, int heads) {
    const kv::KvFormat format = cache.keys.format;
    if ((format != kv::KvFormat::f16 && format != kv::KvFormat::bf16) ||
        cache.values.format != format || cache.kv_heads <= 0 || heads % cache.kv_heads != 0 ||
        heads / cache.kv_heads > kMaxTileWarps) {
        return false;
    }
    const int d = cache.head_dim;
    return (d == 32 || d == 64 || d == 128) && aligned16(cache.keys.data) &&
           aligned16(cache.values.data) && cache.keys.row_bytes == 2 * d &&
           cache.values.row_bytes == 2 * d && cache.keys.head_block_bytes % 16 == 0 &&
           cache.values.head_block_bytes == cache.keys.head_block_bytes && device_has_mma();
}

int tile_attention_tile_tokens(int group) {
    if (group <= 0 || group > kMaxTileWarps) {
        throw std::invalid_argument("tile attention: groups of 1 to " +
                                    std::to_string(kMaxTileWarps) + " query heads");
    }
    return kWarpTokens * (group >= 4 ? 1 : 4 / group);
}

AttentionSplitLimits tile_attention_split_limits(const PagedKvView& cache, int heads) {
    AttentionSplitLimits limits;
    limits.longest = kLongestVectorSplit;
    limits.shortest = 64;
    limits.blocks_per_multiprocessor = 0;
    if (!tile_attention_fits(cache, heads)) {
        return limits;
    }
    const int group = heads / cache.kv_heads;
    const int threads = 32 * group * (tile_attention_tile_tokens(group) / kWarpTokens);
    dispatch<__half>(cache, [&](auto kernel, int head_dim) {
        KVSCOPE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &limits.blocks_per_multiprocessor, kernel, threads, shared_bytes(head_dim)));
    });
    return limits;
}

bool launch_tile_attention(const PagedKvView& cache, const DeviceBatchView& batch, const float* q,
                           int heads, float scale, int max_splits,
                           const AttentionWorkspace& workspace, float* out, cudaStream_t stream) {
    return launch(cache, batch, q, heads, scale, max_splits, workspace, out, stream);
}

bool launch_tile_attention(const PagedKvView& cache, const DeviceBatchView& batch, const float* q,
                           int heads, float scale, int max_splits,
                           const AttentionWorkspace& workspace, __half* out, cudaStream_t stream) {
    return launch(cache, batch, q, heads, scale, max_splits, workspace, out, stream);
}

} // namespace kvscope::kernels
