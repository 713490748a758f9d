// Attention of prefill chunks on tensor cores. The batch's tokens come in
// query tiles (engine/cuda/query_tiles.h: runs of one sequence's consecutive
// tokens); a thread block takes one tile, one KV head and one split of the
// context, stages the split's K and V rows 64 entries at a time in shared
// memory (once for every token and query head of the tile, where the vector
// path reads a row once per token), and each warp computes 16 tokens of one
// query head with mma.sync: scores = Q K^T, an online softmax in registers,
// out += P V (FlashAttention-2's loop). Q and P are rounded to the cache's
// 16-bit type for the products; sums stay fp32. Each token masks its own
// causal range (and sliding window), so tiles may mix prefill positions.
//
// It writes the same partial results as the split kernels, which the same
// merge then combines (with those of a step's untiled tokens, which the
// vector path computes beside it); a step of tiles alone whose every token
// fits one split skips the merge and writes the output itself.
#pragma once

#include "kernels/paged_attention.cuh"

namespace kvscope::kernels {

// Whether the tile path can run this layer's cache for `heads` query heads:
// K and V both f16 or both bf16, rows of exactly 2 * head_dim bytes, head_dim
// 32, 64 or 128 (at 256 a warp's output alone would take 128 registers a
// lane), at most 8 query heads per KV head, a device of compute capability
// 8.0 or later.
bool tile_attention_fits(const PagedKvView& cache, int heads);

// Tokens per query tile for `group` query heads per KV head: a warp computes
// 16 tokens of one head, and a block has at least 4 warps where the group
// allows (64 tokens for multi-head attention, 32 for groups of 2, 16 from 3).
int tile_attention_tile_tokens(int group);

// How a tiled step's splits may be cut (cuda::tiled_split_length halves
// within them, powers of two, counting tiles for tokens): 64 to kLongestVectorSplit
// entries, as many blocks a multiprocessor as fit at once. Zero blocks
// where the tile path does not fit.
AttentionSplitLimits tile_attention_split_limits(const PagedKvView& cache, int heads);

// The split pass over grid (batch.query_tiles, kv_heads, max_splits), into
// the workspace's partial results; or, with max_splits 1 and no untiled
// tokens beside the tiles, the whole attention, written to `out` ((tokens,
// heads, head_dim)) with the merge's maximum and sum. Returns whether it
// wrote `out` (then no merge must follow). Throws std::invalid_argument where
// tile_attention_fits does not hold, q is not 16-byte aligned, or batch.query_tile_tokens is not
// tile_attention_tile_tokens(heads / kv_heads) (the tiles the blocks are
// built for).
bool launch_tile_attention(const PagedKvView& cache, const DeviceBatchView& batch, const float* q,
                           int heads, float scale, int max_splits,
                           const AttentionWorkspace& workspace, float* out, cudaStream_t stream);
bool launch_tile_attention(const PagedKvView& cache, const DeviceBatchView& batch, const float* q,
                           int heads, float scale, int max_splits,
                           const AttentionWorkspace& workspace, __half* out, cudaStream_t stream);

} // namespace kvscope::kernels
