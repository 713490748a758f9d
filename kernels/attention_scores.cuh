// Device helpers the attention and the attention-capture kernels share: the
// scores of one split of one token's context for the query heads of one KV
// head group, computed the same way by both.
#pragma once

#include "kernels/kv_entry.cuh"
#include "kernels/math/paged_slots.h"
#include "kernels/paged_attention.cuh"

#include <cstddef>

namespace kvscope::kernels {

inline constexpr int kAttentionThreads = 128;
inline constexpr int kWarps = kAttentionThreads / 32;

__device__ inline float warp_sum(float x) {
    for (int offset = 16; offset > 0; offset /= 2) {
        x += __shfl_xor_sync(0xffffffffu, x, offset);
    }
    return x;
}
__device__ inline float warp_max(float x) {
    for (int offset = 16; offset > 0; offset /= 2) {
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
    }
    return x;
}

// Query heads per KV head whose value sums the attention keeps in registers
// (GQA groups of real models: 1 to 8); larger groups take a slower path.
inline constexpr int kMaxGroupInRegisters = 8;

// Dynamic shared memory of one (token, KV head, split) block:
//   q      (group, head_dim)          the group's queries
//   key    (warps, head_dim)          one decoded key per warp
//   scores (group, split)             scores, then exp(score - max)
//   sums   (parts, group, head_dim)   the value sums of each share of the
//          entries (parts * head_dim <= max(threads, head_dim)); only for
//          the attention's register path (value_sums), so larger groups and
//          the capture ask for no more than they use
__host__ __device__ inline std::size_t split_shared_floats(int group, int head_dim, int split,
                                                           bool value_sums) {
    const std::size_t widest = head_dim > kAttentionThreads ? head_dim : kAttentionThreads;
    const bool sums = value_sums && group <= kMaxGroupInRegisters;
    return static_cast<std::size_t>(group) * head_dim +
           static_cast<std::size_t>(kWarps) * head_dim + static_cast<std::size_t>(group) * split +
           (sums ? static_cast<std::size_t>(group) * widest : 0);
}

// Scores of the split's entries for every query head of the group, into
// `scores` (group, stride): each warp decodes one key at a time (once for all the group's
// heads), then reduces a dot product per head.
__device__ inline void split_scores(const PagedKvView& cache, const std::int32_t* table,
                                    int kv_head, int begin, int n, const float* q_s, float* key_s,
                                    float* scores, int stride, int group, float scale) {
    const int d = cache.head_dim;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    float* key = key_s + warp * d;
    for (int j = warp; j < n; j += kWarps) {
        const int entry = begin + j;
        const std::int32_t block = math::block_of_entry(table, entry, cache.block_size);
        const int offset = entry % cache.block_size;
        for (int i = lane; i < d; i += 32) {
            key[i] = kv_entry_value(cache, true, block, offset, kv_head, i);
        }
        __syncwarp();
        for (int g = 0; g < group; ++g) {
            float partial = 0.0f;
            for (int i = lane; i < d; i += 32) {
                partial += q_s[g * d + i] * key[i];
            }
            partial = warp_sum(partial);
            if (lane == 0) {
                scores[g * stride + j] = partial * scale;
            }
        }
        __syncwarp();
    }
}

// The most entries a query of a context up to max_context attends in this
// layer: the splits a launch needs.
inline int attended_entries(const PagedKvView& cache, int max_context) {
    return cache.window > 0 && cache.window < max_context ? cache.window : max_context;
}

// Loads the group's queries of token t into shared memory.
__device__ inline void load_queries(const float* q, int token, int heads, int first_head, int group,
                                    int d, float* q_s) {
    const float* src = q + (static_cast<std::int64_t>(token) * heads + first_head) * d;
    for (int i = threadIdx.x; i < group * d; i += blockDim.x) {
        q_s[i] = src[i];
    }
}

// What one (token, KV head, split) thread block of grid (tokens, kv_heads,
// splits) works on: its share of the token's context, for the query heads
// of its group. n is 0 for a split past the token's context.
struct SplitBlock {
    int token;
    int kv_head;
    int split;
    int length; // entries per split (the last may have fewer: n)
    int seq;
    int group;
    int first_head; // the group's first query head
    int begin;      // cache entries [begin, begin + n), the splits cut from the first attended
    int n;
    const std::int32_t* table; // the sequence's block table
};

__device__ inline SplitBlock split_block(const PagedKvView& cache, const DeviceBatchView& batch,
                                         int heads, int length) {
    SplitBlock b;
    b.token = batch.per_token_row_token(static_cast<int>(blockIdx.x));
    b.kv_head = blockIdx.y;
    b.split = blockIdx.z;
    b.length = length;
    b.seq = batch.sequence_of[b.token];
    b.group = heads / cache.kv_heads;
    b.first_head = b.kv_head * b.group;
    const int context = batch.cache_positions[b.token] + 1;
    // A sliding window's splits start at its oldest entry, as the CPU's
    // segments do: both attend the same entries.
    const math::EntryRange entries = math::split_entries(context, cache.window, b.split, length);
    b.begin = entries.begin;
    b.n = entries.end - entries.begin;
    b.table = batch.table_of(b.seq);
    return b;
}

// The split's scores for every query head of the group, into shared memory
// laid out as split_shared_floats says; returns them, (group, b.length).
__device__ inline float* score_split(const SplitBlock& b, const PagedKvView& cache, const float* q,
                                     int heads, float scale, float* shared) {
    const int d = cache.head_dim;
    float* q_s = shared;
    float* key_s = q_s + b.group * d;
    float* scores = key_s + kWarps * d;
    load_queries(q, b.token, heads, b.first_head, b.group, d, q_s);
    __syncthreads();
    split_scores(cache, b.table, b.kv_head, b.begin, b.n, q_s, key_s, scores, b.length, b.group,
                 scale);
    __syncthreads();
    return scores;
}

} // namespace kvscope::kernels
