// Causal attention of a step's query tokens over their sequences' paged KV
// cache, every KV format, prefill chunks and decodes alike: token t attends
// over cache entries 0..cache_positions[t] of its sequence (prefix-cached
// blocks and this step's new entries, already appended). Grouped-query: a
// thread block reads each KV head once for all of its query heads. Split-K
// (flash-decoding): contexts longer than a split are cut into splits attended
// in parallel and merged. Splits are kAttentionSplit entries long unless the
// caller asks for others (AttentionWorkspace::split: the CUDA backend plans
// them to fill the GPU's waves, cuda::attention_split_length). Caches of 16-bit K and V
// take the vector path (vector_attention.cuh), which reads each row once with
// 16-byte loads and also runs longer splits, up to kLongestVectorSplit. A
// batch cut into query tiles (DeviceBatchView::query_tiles: prefill chunks)
// over a 16-bit cache takes the tensor-core path instead (tile_attention.cuh),
// which reads a row once for a whole tile.
#pragma once

#include "kernels/paged_kv_view.cuh"

#include <cstddef>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

inline constexpr int kAttentionSplit = 256; // cache entries per split (as the CPU's segments)
inline constexpr int kShortestAttentionSplit = 32; // the shortest split a caller may ask for
// The longest split of the vector path (the general path keeps a split's
// scores in shared memory, so it takes at most kAttentionSplit).
inline constexpr int kLongestVectorSplit = 2048;

// Scratch the launcher needs, sized by the caller once per shape bucket.
struct AttentionWorkspace {
    // Cache entries per split: a multiple of kShortestAttentionSplit up to
    // kAttentionSplit, or to kLongestVectorSplit where the vector path runs.
    // max_splits below counts splits of this length.
    int split = kAttentionSplit;
    float* partial_out = nullptr; // (tokens, heads, max_splits, head_dim)
    float* partial_max = nullptr; // (tokens, heads, max_splits)
    float* partial_sum = nullptr; // (tokens, heads, max_splits)
    float* lse_max = nullptr;     // (tokens, heads): the merged maximum ...
    float* lse_sum = nullptr;     // ... and sum of exp(score - maximum), for the capture

    static std::size_t floats(int tokens, int heads, int max_splits, int head_dim);
    // Points the five arrays into `base` (floats(...) floats), for splits of
    // `split` entries. Throws std::invalid_argument for a split length other
    // than a multiple of kShortestAttentionSplit up to kLongestVectorSplit.
    static AttentionWorkspace carve(float* base, int tokens, int heads, int max_splits,
                                    int head_dim, int split = kAttentionSplit);
};

// Whether this layer's cache takes the vector path for `heads` query heads
// (then any split length up to kLongestVectorSplit runs).
bool attention_takes_vector_path(const PagedKvView& cache, int heads);

// How a step's splits may be cut for this cache (cuda::attention_split_length
// picks within them). The vector path: splits of 64 to kLongestVectorSplit
// entries (a 64-entry split gives each of a block's warps a tile of 16 rows
// at head_dim 64), as many blocks a multiprocessor as its kernel fits at once
// (a grid of one full wave keeps the most loads in flight). The general path,
// and any step whose attention is captured (the capture rescores a split in
// shared memory): 32 to kAttentionSplit entries, 2 blocks a multiprocessor.
struct AttentionSplitLimits {
    int longest = kAttentionSplit;
    int shortest = kShortestAttentionSplit;
    int blocks_per_multiprocessor = 2;
};
AttentionSplitLimits attention_split_limits(const PagedKvView& cache, int heads, bool capture);

// q, out: (tokens, heads, head_dim); on the vector path q must be 16-byte
// aligned (std::invalid_argument otherwise). head_dim: a multiple of 4 up to
// 512, or anything up to 128 (the merge's limits).
// max_context: the longest cache_positions + 1 of the batch (with
// workspace.split, sets the number of splits; the workspace holds at least
// that many; a sliding-window layer, cache.window, needs fewer). scale: what
// scores are multiplied by (the model's attention_scale). Throws std::invalid_argument for a
// split longer than kAttentionSplit off the vector path.
void launch_paged_attention(const PagedKvView& cache, const DeviceBatchView& batch, const float* q,
                            int heads, float scale, int max_context,
                            const AttentionWorkspace& workspace, float* out, cudaStream_t stream);

// The same, the output written as fp16 (saturated) for the output projection.
void launch_paged_attention_half(const PagedKvView& cache, const DeviceBatchView& batch,
                                 const float* q, int heads, float scale, int max_context,
                                 const AttentionWorkspace& workspace, __half* out,
                                 cudaStream_t stream);

} // namespace kvscope::kernels
