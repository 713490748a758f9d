#include "engine/sched/token_eviction.h"

namespace kvscope::sched {

EvictionOutcome compact_sequence(std::int64_t request, const std::vector<std::int32_t>& kept,
                                 kv::SequenceBlocks& sequence, std::vector<float>& scores,
                                 kv::KvManager& kv, runner::Backend& backend) {
    EvictionOutcome outcome;
    const std::int32_t entries = sequence.length;
    const auto new_length = static_cast<std::int32_t>(kept.size());
    if (new_length >= entries) {
        return outcome;
    }
    const int bs = kv.block_size();
    std::int32_t first_moved = 0;
    while (first_moved < new_length && kept[static_cast<std::size_t>(first_moved)] == first_moved) {
        ++first_moved;
    }
    // Rewrite whole blocks from the one holding the first moved entry, so a
    // block quantised as a whole (KIVI) is rebuilt from all its rows.
    const std::int32_t start = first_moved / bs * bs;
    const auto slot_of = [&](std::int32_t entry) {
        return sequence.block_table[static_cast<std::size_t>(entry / bs)] * bs + entry % bs;
    };
    std::vector<std::int32_t> from;
    for (std::int32_t i = start; i < new_length; ++i) {
        from.push_back(slot_of(kept[static_cast<std::size_t>(i)]));
    }
    const int first_block = start / bs;
    const int last_block = (new_length + bs - 1) / bs;
    const std::optional<std::vector<kv::BlockId>> replaced =
        kv.make_private(request, sequence, first_block, last_block);
    if (!replaced) {
        return outcome; // try again at a later step
    }
    std::vector<std::int32_t> to;
    for (std::int32_t i = start; i < new_length; ++i) {
        to.push_back(slot_of(i));
    }
    backend.copy_slots(from, to);
    std::vector<kv::BlockId> released = kv.drop(request, *replaced);
    const std::vector<kv::BlockId> trailing = kv.truncate(request, sequence, last_block);
    released.insert(released.end(), trailing.begin(), trailing.end());
    backend.release_blocks(released);
    sequence.length = new_length;
    for (int b = first_block; b < last_block; ++b) {
        const std::int32_t held = std::min(bs, new_length - b * bs);
        outcome.rewritten.emplace_back(sequence.block_table[static_cast<std::size_t>(b)], held);
    }
    if (!scores.empty()) {
        std::vector<float> kept_scores;
        kept_scores.reserve(kept.size());
        for (const std::int32_t k : kept) {
            kept_scores.push_back(static_cast<std::size_t>(k) < scores.size()
                                      ? scores[static_cast<std::size_t>(k)]
                                      : 0.0f);
        }
        scores = std::move(kept_scores);
    }
    outcome.evicted_tokens = entries - new_length;
    outcome.blocks_released = static_cast<int>(released.size());
    return outcome;
}

} // namespace kvscope::sched
