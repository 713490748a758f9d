#include "engine/kv/block_allocator.h"

#include <stdexcept>
#include <string>

namespace kvscope::kv {

BlockAllocator::BlockAllocator(int num_blocks)
    : in_use_(static_cast<std::size_t>(num_blocks)) {
    if (num_blocks <= 0) {
        throw std::invalid_argument("a KV cache needs at least one block");
    }
    for (BlockId b = 0; b < num_blocks; ++b) {
        free_.push_back(b);
    }
}

std::optional<BlockId> BlockAllocator::allocate() {
    if (free_.empty()) {
        return std::nullopt;
    }
    const BlockId block = free_.front();
    free_.pop_front();
    in_use_[static_cast<std::size_t>(block)] = true;
    return block;
}

void BlockAllocator::free(BlockId block) {
    if (block < 0 || block >= total()) {
        throw std::logic_error("freeing block " + std::to_string(block) + " outside the pool of " +
                               std::to_string(total()));
    }
    if (!in_use_[static_cast<std::size_t>(block)]) {
        throw std::logic_error("block " + std::to_string(block) + " freed twice");
    }
    in_use_[static_cast<std::size_t>(block)] = false;
    free_.push_back(block);
}

bool reserve(SequenceBlocks& sequence, std::int32_t new_length, int block_size,
             BlockAllocator& allocator) {
    const std::size_t had = sequence.block_table.size();
    const auto needed = static_cast<std::size_t>((new_length + block_size - 1) / block_size);
    const auto grown = needed > had ? needed - had : 0;
    if (static_cast<std::int64_t>(grown) * sequence.groups() > allocator.free_count()) {
        return false;
    }
    for (int g = 0; g < sequence.groups(); ++g) {
        for (std::size_t i = 0; i < grown; ++i) {
            sequence.table(g).push_back(*allocator.allocate());
        }
    }
    return true;
}

void release(SequenceBlocks& sequence, BlockAllocator& allocator) {
    for (int g = 0; g < sequence.groups(); ++g) {
        for (const BlockId block : sequence.table(g)) {
            if (block != kNoBlock) {
                allocator.free(block);
            }
        }
        sequence.table(g).clear();
    }
    sequence.length = 0;
}

} // namespace kvscope::kv
