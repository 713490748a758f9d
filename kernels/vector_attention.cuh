// The fast path of the paged attention's split pass (16-bit caches, and q8_0,
// q4_0 and fp8 ones; see vector_attention_fits): each lane reads 8 values of a
// cache row at a time (16 bytes of an f16 row),
// a warp covers several rows per load, and every lane keeps its rows' softmax
// state online (running maximum, sum and weighted values), so K and V are read
// once, in one pass, with no scores in shared memory. One kernel per (element
// type, head_dim, group bucket), chosen at run time in one place
// (vector_attention.cu). It writes the same partial results as the general
// split kernel (paged_attention.cu), so the same merge follows it.
#pragma once

#include "kernels/paged_attention.cuh"

namespace kvscope::kernels {

// Whether the vector path can run this layer's cache for `heads` query heads,
// at most 8 query heads per KV head: K and V both f16 or both bf16, head_dim
// 32, 64, 128 or 256, rows 16-byte aligned (read into registers, or through
// a shared-memory ring: wide_row_fetch.h); or K and V both q8_0, q4_0 or fp8
// e4m3, head_dim 64 or 128, rows whole 4-byte words (copied asynchronously
// through the ring, 16 bytes at a time for whole tiles, and decoded 8 values
// at a time by math::decode_row_chunk, math::decode_row_element's bits).
bool vector_attention_fits(const PagedKvView& cache, int heads);

// Blocks of the kernel this cache and group take that fit one multiprocessor
// at once (registers bound it: 2 to 8), for planning splits; 0 where the
// vector path does not fit.
int vector_attention_resident_blocks(const PagedKvView& cache, int heads);

// The split pass over grid (tokens, kv_heads, max_splits), any split length
// (workspace.split); in a step cut into query tiles, over its single tokens
// only (DeviceBatchView::per_token_rows). Throws std::invalid_argument where vector_attention_fits
// does not hold or q is not 16-byte aligned.
void launch_vector_attention_splits(const PagedKvView& cache, const DeviceBatchView& batch,
                                    const float* q, int heads, float scale, int max_splits,
                                    const AttentionWorkspace& workspace, cudaStream_t stream);

} // namespace kvscope::kernels
