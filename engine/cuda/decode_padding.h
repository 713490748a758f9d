// Decode steps padded to a bucketed batch size, so one captured CUDA graph
// serves every batch up to its bucket (vLLM captures its decode graphs the
// same way). The padding rows are real decodes of a one-token sequence whose
// only block is a spare block past the KV manager's pool: they compute and
// write there, and nobody reads them. Host-only, so the CPU tests check it.
#pragma once

#include "engine/runner/forward_batch.h"

#include <cstdint>
#include <optional>

namespace kvscope::cuda {

// The batch sizes decode graphs are captured for.
inline constexpr int kDecodeBuckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};

// The smallest bucket holding `tokens`; nullopt past the largest.
std::optional<int> decode_bucket(int tokens);

// The graph's count of `split_entries`-entry attention splits for a context
// of `max_context` entries: up to 8, the power of two at or above the count
// (short contexts, few entries to waste); past 8, the count rounded up to
// one of at most three significant bits (10, 12, 14, 16, 20, 24, 28, 32, 40,
// ...), so contexts grow through few graphs (four an octave) while a
// graph's split count, and with it the context its splits are planned for,
// overshoots the real one by at most 25%. (Powers of two, until 2026-11-28, overshot by up
// to 100%: a 1k prompt's first decode, at 1,025 entries, planned for 2,048.)
int split_bucket(int max_context, int split_entries);

// Cache entries per attention split for a step of `tokens` query tokens over
// `kv_heads` KV heads whose longest context is `context` entries. The
// attention runs a thread block per token, KV head and split, and a GPU
// holds `blocks_per_multiprocessor` x `multiprocessors` of them at once (a
// wave). A decode of one sequence has only kv_heads blocks per split (3 for
// SmolLM2): with long splits 3 of an H100's 132 multiprocessors worked while
// the rest idled (2026-11-24). And a grid of 1.45 waves, as halving lengths
// gave 32 x 4k, 32 x 1k, 128 x 1k and 128 x 4k decodes alike, runs its last
// wave half empty.
//
// So each split count from the fewest (splits of `longest`) to the most (of
// `shortest`) is weighed by how full its waves are (blocks over the slots of
// the waves they need), and the fewest splits within 85% of the fullest win:
// FlashAttention's split heuristic (fewer splits: less to merge, longer
// runs). Lengths are multiples of kSplitLengthStep, the shortest giving
// their split count. The limits for a cache come from
// kernels::attention_split_limits (the vector path: 64 to 2048 entries, as
// many blocks as fit the GPU at once; the general path: 32 to 256, 2).
int attention_split_length(int tokens, int kv_heads, int context, int multiprocessors, int longest,
                           int shortest, int blocks_per_multiprocessor = 2);
// kernels::kShortestAttentionSplit (the CUDA backend checks they agree):
// the kernels take split lengths that are multiples of it.
inline constexpr int kSplitLengthStep = 32;

// How full the waves of a grid of `blocks` are, a wave being `wave` blocks:
// blocks / (waves needed x wave), in (0, 1].
double wave_fill(std::int64_t blocks, std::int64_t wave);

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
