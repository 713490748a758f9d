#include "engine/cuda/decode_padding.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>

namespace kvscope::cuda {

std::optional<int> decode_bucket(int tokens) {
    for (const int bucket : kDecodeBuckets) {
        if (tokens <= bucket) {
            return bucket;
        }
    }
    return std::nullopt;
}

int split_bucket(int max_context, int split_entries) {
    const int splits = std::max((max_context + split_entries - 1) / split_entries, 1);
    if (splits <= 8) { // short contexts: powers of two, few graphs for few entries
        int bucket = 1;
        while (bucket < splits) {
            bucket *= 2;
        }
        return bucket;
    }
    // Rounded up to a multiple of the smallest power of two `step` that 8
    // steps reach: more than 4 steps and at most 8, so at most three
    // significant bits, and at most a quarter over (5 steps for 4 and one).
    int step = 1;
    while (splits > 8 * step) {
        step *= 2;
    }
    return (splits + step - 1) / step * step;
}

double wave_fill(std::int64_t blocks, std::int64_t wave) {
    blocks = std::max<std::int64_t>(blocks, 1);
    wave = std::max<std::int64_t>(wave, 1);
    const std::int64_t waves = (blocks + wave - 1) / wave;
    return static_cast<double>(blocks) / static_cast<double>(waves * wave);
}

int attention_split_length(int tokens, int kv_heads, int context, int multiprocessors, int longest,
                           int shortest, int blocks_per_multiprocessor) {
    constexpr int kStep = kSplitLengthStep;
    constexpr double kNearlyFullest = 0.85;
    const std::int64_t wave = static_cast<std::int64_t>(std::max(blocks_per_multiprocessor, 1)) *
                              std::max(multiprocessors, 1);
    const std::int64_t rows =
        static_cast<std::int64_t>(std::max(tokens, 1)) * std::max(kv_heads, 1);
    const std::int64_t entries = std::max(context, 1);
    // Each length from the longest down (split counts from the fewest up):
    // how full its waves are. No allocation: this runs every step.
    const auto splits_of = [&](int length) {
        return (entries + length - 1) / length;
    };
    const auto fill_of = [&](int length) {
        return wave_fill(rows * splits_of(length), wave);
    };
    double fullest = 0.0;
    for (int length = longest; length >= shortest; length -= kStep) {
        fullest = std::max(fullest, fill_of(length));
    }
    // The fewest splits within reach of the fullest, cut as evenly as that
    // count allows: the shortest length giving it.
    for (int length = longest; length >= shortest; length -= kStep) {
        if (fill_of(length) < kNearlyFullest * fullest) {
            continue;
        }
        int evenest = length;
        while (evenest - kStep >= shortest && splits_of(evenest - kStep) == splits_of(length)) {
            evenest -= kStep;
        }
        return evenest;
    }
    return longest; // shortest > longest: nothing to choose from
}

bool is_plain_decode(const runner::ForwardBatch& batch) {
    const std::int64_t tokens = batch.token_count();
    if (tokens == 0 || tokens != batch.sequence_count() ||
        batch.logit_tokens.size() != static_cast<std::size_t>(tokens) ||
        batch.captures_attention()) {
        return false;
    }
    for (std::int64_t t = 0; t < tokens; ++t) {
        const auto i = static_cast<std::size_t>(t);
        if (batch.sequence_of[i] != t || batch.logit_tokens[i] != t) {
            return false;
        }
    }
    return true;
}

runner::ForwardBatch pad_decode_batch(const runner::ForwardBatch& batch, int bucket,
                                      kv::BlockId spare_block) {
    const auto real = static_cast<int>(batch.token_count());
    if (bucket < real) {
        throw std::invalid_argument("pad_decode_batch: bucket smaller than the batch");
    }
    const auto extra = static_cast<std::size_t>(bucket - real);
    runner::ForwardBatch padded = batch;
    padded.capture_attention_from.resize(static_cast<std::size_t>(real), INT32_MAX);
    // Slots and tables are group-major: each group's gets its own padded rows.
    padded.slot_mapping.clear();
    padded.block_tables.clear();
    const auto tables = static_cast<std::size_t>(batch.block_table_offsets.back());
    for (int g = 0; g < batch.kv_groups; ++g) {
        const std::span<const std::int32_t> slots = batch.group_slots(g);
        padded.slot_mapping.insert(padded.slot_mapping.end(), slots.begin(), slots.end());
        padded.slot_mapping.insert(padded.slot_mapping.end(), extra,
                                   spare_block * batch.block_size);
        const auto first = batch.block_tables.begin() +
                           static_cast<std::ptrdiff_t>(static_cast<std::size_t>(g) * tables);
        padded.block_tables.insert(padded.block_tables.end(), first,
                                   first + static_cast<std::ptrdiff_t>(tables));
        padded.block_tables.insert(padded.block_tables.end(), extra, spare_block);
    }
    for (int t = real; t < bucket; ++t) {
        padded.token_ids.push_back(0);
        padded.positions.push_back(0);
        padded.cache_positions.push_back(0);
        padded.sequence_of.push_back(t);
        padded.context_lengths.push_back(1);
        padded.block_table_offsets.push_back(padded.block_table_offsets.back() + 1);
        padded.capture_attention_from.push_back(INT32_MAX);
        padded.logit_tokens.push_back(t);
    }
    return padded;
}

} // namespace kvscope::cuda
