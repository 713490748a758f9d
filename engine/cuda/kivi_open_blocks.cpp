#include "engine/cuda/kivi_open_blocks.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvscope::cuda {

KiviOpenBlocks::KiviOpenBlocks(int num_blocks) {
    if (num_blocks <= 0) {
        throw std::invalid_argument("KIVI open blocks need a positive block count");
    }
    slot_of_.assign(static_cast<std::size_t>(num_blocks), -1);
}

const KiviOpenBlocks::Step& KiviOpenBlocks::begin_step(std::span<const std::int32_t> slot_mapping,
                                                       int block_size) {
    if (in_step_) {
        throw std::logic_error("KiviOpenBlocks: a step began before the last one ended");
    }
    if (block_size <= 0) {
        throw std::invalid_argument("KiviOpenBlocks: block size must be positive");
    }
    const std::int64_t slots = static_cast<std::int64_t>(slot_of_.size()) * block_size;
    for (const std::int32_t slot : slot_mapping) {
        if (slot < 0 || slot >= slots) {
            throw std::invalid_argument("slot " + std::to_string(slot) +
                                        " is outside the KV cache");
        }
    }
    step_.filled_blocks.clear();
    step_.opened_slots.clear();
    for (const std::int32_t slot : slot_mapping) {
        const std::size_t block = static_cast<std::size_t>(slot / block_size);
        std::int32_t& open = slot_of_[block];
        if (open < 0) {
            if (free_.empty()) {
                open = capacity_++;
            } else {
                open = free_.back();
                free_.pop_back();
            }
            step_.opened_slots.push_back(open);
        }
    }
    step_.write_slot = slot_of_;
    step_.read_slot = slot_of_;
    for (const std::int32_t slot : slot_mapping) {
        if (slot % block_size != block_size - 1) {
            continue;
        }
        const std::size_t block = static_cast<std::size_t>(slot / block_size);
        if (step_.read_slot[block] >= 0) { // not listed yet (a repeated slot is listed once)
            step_.read_slot[block] = -1;
            step_.filled_blocks.push_back(static_cast<std::int32_t>(block));
        }
    }
    step_.capacity = capacity_;
    in_step_ = true;
    return step_;
}

int KiviOpenBlocks::capacity_needed(std::span<const std::int32_t> slot_mapping,
                                    int block_size) const {
    if (block_size <= 0) {
        throw std::invalid_argument("KiviOpenBlocks: block size must be positive");
    }
    // Distinct blocks without a slot: each takes a free slot, else a new one.
    std::vector<std::int32_t> opening;
    opening.reserve(slot_mapping.size());
    for (const std::int32_t slot : slot_mapping) {
        const std::int32_t block = slot / block_size;
        if (slot >= 0 && static_cast<std::size_t>(block) < slot_of_.size() &&
            slot_of_[static_cast<std::size_t>(block)] < 0) {
            opening.push_back(block);
        }
    }
    std::sort(opening.begin(), opening.end());
    const auto distinct = std::unique(opening.begin(), opening.end()) - opening.begin();
    return std::max(capacity_, open_count() + static_cast<int>(distinct));
}

void KiviOpenBlocks::end_step() {
    if (!in_step_) {
        return;
    }
    for (const std::int32_t block : step_.filled_blocks) {
        std::int32_t& open = slot_of_[static_cast<std::size_t>(block)];
        free_.push_back(open);
        open = -1;
    }
    in_step_ = false;
}

void KiviOpenBlocks::release(std::span<const kv::BlockId> blocks) {
    if (in_step_) {
        throw std::logic_error("KiviOpenBlocks: blocks released during a step");
    }
    for (const kv::BlockId block : blocks) {
        if (block < 0 || static_cast<std::size_t>(block) >= slot_of_.size()) {
            throw std::invalid_argument("block " + std::to_string(block) +
                                        " is outside the KV cache");
        }
        std::int32_t& open = slot_of_[static_cast<std::size_t>(block)];
        if (open >= 0) {
            free_.push_back(open);
            open = -1;
        }
    }
}

} // namespace kvscope::cuda
