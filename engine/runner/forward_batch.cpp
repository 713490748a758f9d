#include "engine/runner/forward_batch.h"

#include <stdexcept>
#include <string>

namespace kvscope::runner {

ForwardBatch build_forward_batch(std::span<const SequenceStep> steps, int block_size,
                                 BatchDetail detail) {
    const bool full = detail == BatchDetail::full;
    ForwardBatch batch;
    batch.block_size = block_size;
    batch.block_table_offsets.push_back(0);
    batch.kv_groups = steps.empty() ? 1 : steps.front().blocks->groups();
    // Group 0's slots and tables are gathered in place, the other groups' here.
    std::vector<std::vector<std::int32_t>> other_slots(
        static_cast<std::size_t>(batch.kv_groups - 1));
    std::vector<std::vector<kv::BlockId>> other_tables(other_slots.size());
    for (std::size_t s = 0; s < steps.size(); ++s) {
        const SequenceStep& step = steps[s];
        const kv::SequenceBlocks& blocks = *step.blocks;
        if (blocks.groups() != batch.kv_groups) {
            throw std::invalid_argument("sequences of one batch have different KV groups");
        }
        const auto new_length = blocks.length + static_cast<std::int32_t>(step.tokens.size());
        if (new_length > blocks.capacity(block_size)) {
            throw std::invalid_argument(
                "sequence " + std::to_string(s) + " needs room for " + std::to_string(new_length) +
                " tokens but its blocks hold " + std::to_string(blocks.capacity(block_size)));
        }
        const std::int32_t first_position =
            step.first_position >= 0 ? step.first_position : blocks.length;
        for (std::size_t i = 0; i < step.tokens.size(); ++i) {
            if (step.logits_for_all_tokens || (!step.skip_logits && i + 1 == step.tokens.size())) {
                batch.logit_tokens.push_back(static_cast<std::int32_t>(batch.sequence_of.size()));
            }
            batch.sequence_of.push_back(static_cast<std::int32_t>(s));
            if (!full) {
                continue;
            }
            const std::int32_t entry = blocks.length + static_cast<std::int32_t>(i);
            const kv::BlockId block =
                blocks.block_table[static_cast<std::size_t>(entry / block_size)];
            batch.token_ids.push_back(step.tokens[i]);
            batch.positions.push_back(first_position + static_cast<std::int32_t>(i));
            batch.cache_positions.push_back(entry);
            batch.slot_mapping.push_back(block * block_size + entry % block_size);
            for (std::size_t g = 0; g < other_slots.size(); ++g) {
                const kv::BlockId other =
                    blocks.other_tables[g][static_cast<std::size_t>(entry / block_size)];
                other_slots[g].push_back(other * block_size + entry % block_size);
            }
        }
        batch.context_lengths.push_back(new_length);
        batch.capture_attention_from.push_back(step.capture_attention_from);
        if (!full) {
            continue;
        }
        batch.block_tables.insert(batch.block_tables.end(), blocks.block_table.begin(),
                                  blocks.block_table.end());
        batch.block_table_offsets.push_back(static_cast<std::int32_t>(batch.block_tables.size()));
        for (std::size_t g = 0; g < other_tables.size(); ++g) {
            other_tables[g].insert(other_tables[g].end(), blocks.other_tables[g].begin(),
                                   blocks.other_tables[g].end());
        }
    }
    for (std::size_t g = 0; g < other_slots.size(); ++g) {
        batch.slot_mapping.insert(batch.slot_mapping.end(), other_slots[g].begin(),
                                  other_slots[g].end());
        batch.block_tables.insert(batch.block_tables.end(), other_tables[g].begin(),
                                  other_tables[g].end());
    }
    return batch;
}

} // namespace kvscope::runner
