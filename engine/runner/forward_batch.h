// One forward step's work as flat arrays, the form every backend consumes:
// the tokens of all sequences in the batch (prefill chunks and decodes mixed),
// where each token's K/V goes (slot mapping) and which cached blocks each
// sequence attends over.
#pragma once

#include "engine/kv/block_allocator.h"

#include <climits>
#include <cstdint>
#include <span>
#include <vector>

namespace kvscope::runner {

struct ForwardBatch {
    int block_size = 16;
    // Per token, (tokens):
    std::vector<std::int32_t> token_ids;
    std::vector<std::int32_t> positions; // position within its sequence (for RoPE)
    // Index of its entry in its sequence's cache: equal to the position
    // until an eviction policy drops tokens. It attends entries 0..this.
    std::vector<std::int32_t> cache_positions;
    // block * block_size + offset in block, per KV group (kv_groups.h) in
    // turn: (kv_groups, tokens).
    std::vector<std::int32_t> slot_mapping;
    std::vector<std::int32_t> sequence_of; // index into the per-sequence arrays
    // Per sequence, (sequences):
    std::vector<std::int32_t> context_lengths;     // cached tokens after this step
    std::vector<std::int32_t> block_table_offsets; // (sequences + 1) into a group's tables
    // Every sequence's table of group 0, then of group 1, ...: (kv_groups,
    // block_table_offsets.back()); kNoBlock where a sliding group let go.
    std::vector<kv::BlockId> block_tables;
    int kv_groups = 1;
    // Tokens at or after this position add their attention probabilities to
    // the sequence's captured scores (for H2O and SnapKV); INT32_MAX: none.
    std::vector<std::int32_t> capture_attention_from;
    // Tokens whose next-token logits the caller wants, in output order.
    std::vector<std::int32_t> logit_tokens;
    // Layers to run before the output head; 0: all. Fewer is a self-draft
    // (speculative decoding): it writes only those layers' K/V, which the
    // full pass that verifies the draft writes again.
    int layers = 0;

    // Tokens of a full batch; 0 for BatchDetail::shape (count sequence_of there).
    std::int64_t token_count() const { return static_cast<std::int64_t>(token_ids.size()); }
    std::int64_t sequence_count() const {
        return static_cast<std::int64_t>(context_lengths.size());
    }
    // Group `group`'s slots, (tokens), and its table for `sequence`.
    std::span<const std::int32_t> group_slots(int group) const {
        const auto n = static_cast<std::size_t>(token_count());
        return std::span<const std::int32_t>(slot_mapping)
            .subspan(static_cast<std::size_t>(group) * n, n);
    }
    const kv::BlockId* group_table(int group, std::int64_t sequence) const {
        return block_tables.data() +
               static_cast<std::size_t>(group) *
                   static_cast<std::size_t>(block_table_offsets.back()) +
               block_table_offsets[static_cast<std::size_t>(sequence)];
    }
    bool captures_attention() const {
        for (const std::int32_t from : capture_attention_from) {
            if (from != INT32_MAX) {
                return true;
            }
        }
        return false;
    }
};

// One sequence's part of a step: `tokens` continue the sequence at
// position `blocks.length`; the blocks must already have room for them.
struct SequenceStep {
    const kv::SequenceBlocks* blocks = nullptr;
    std::span<const std::int32_t> tokens;
    bool logits_for_all_tokens = false; // else only for the last one
    bool skip_logits = false;           // none at all (a prefill chunk that is not the last)
    // RoPE position of the first token; -1: blocks.length (no tokens evicted).
    std::int32_t first_position = -1;
    std::int32_t capture_attention_from = INT32_MAX; // see ForwardBatch
};

// How much of a ForwardBatch a backend reads: all of it, or (a backend that
// computes nothing, engine/sim) only its shape - sequence_of, logit_tokens
// and context_lengths - which spares copying every running sequence's block
// table on every step.
enum class BatchDetail { full, shape };

// Throws std::invalid_argument when a sequence's blocks cannot hold its tokens.
ForwardBatch build_forward_batch(std::span<const SequenceStep> steps, int block_size,
                                 BatchDetail detail = BatchDetail::full);

} // namespace kvscope::runner
