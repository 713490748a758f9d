// Decode steps padded to a bucketed batch size, so one captured CUDA graph
// serves every batch up to its bucket (vLLM captures its decode graphs the
// same way). The padding rows are real decodes of a one-token sequence whose
// only block is a spare block past the KV manager's pool: they compute and
// write there, and nobody reads them. Host-only, so the CPU tests check it.
#pragma once

#include "engine/runner/forward_batch.h"

#include <optional>

namespace kvscope::cuda {

// The batch sizes decode graphs are captured for.
inline constexpr int kDecodeBuckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};

// The smallest bucket holding `tokens`; nullopt past the largest.
std::optional<int> decode_bucket(int tokens);

// The graph's attention splits for a context of `max_context` entries: a
// power of two, so contexts grow through few graphs.
int split_bucket(int max_context, int split_entries);

// Cache entries per attention split for a step of `tokens` query tokens over
// `kv_heads` KV heads whose longest context is `context` entries. The
// attention runs a thread block per token, KV head and split, so a decode of
// one sequence has only kv_heads blocks per split (3 for SmolLM2): with
// `longest` splits, 3 of an H100's 132 multiprocessors worked while the rest
// idled (2026-11-24). So: `longest` while the grid has `blocks_per_multiprocessor`
// blocks per multiprocessor, else halved down to `shortest` until it has.
// Powers of two in, a power of two out. The limits for a cache come from
// kernels::attention_split_limits (the vector path: 64 to 2048 entries, as
// many blocks as fit the GPU at once; the general path: 32 to 256, 2).
int attention_split_length(int tokens, int kv_heads, int context, int multiprocessors, int longest,
                           int shortest, int blocks_per_multiprocessor = 2);

// Whether `batch` is a pure decode step a graph can run: one token per
// sequence, each wanting its logits, in order, and no attention capture.
bool is_plain_decode(const runner::ForwardBatch& batch);

// `batch` (a plain decode) padded to `bucket` sequences with decodes of
// token 0 at position 0 into slot 0 of `spare_block`, in every KV group's
// slots and tables (each group's padded rows after its real ones).
// block_tables stays the last-growing array: the rest of the layout depends
// on the bucket alone.
runner::ForwardBatch pad_decode_batch(const runner::ForwardBatch& batch, int bucket,
                                      kv::BlockId spare_block);

} // namespace kvscope::cuda
