#include "profiler/block_map_state.h"

#include "engine/events/typed_events.h"

#include <algorithm>

namespace kvscope::profiler {

using events::EventKind;

BlockUse BlockState::use() const {
    if (!owners.empty()) {
        return BlockUse::used;
    }
    return hashed ? BlockUse::cached : BlockUse::free;
}

BlockMapState::BlockMapState(int blocks, int block_size)
    : block_size_(block_size > 0 ? block_size : 16)
    , blocks_(static_cast<std::size_t>(std::max(0, blocks))) {}

bool BlockMapState::is_block_event(EventKind kind) {
    switch (kind) {
    case EventKind::block_allocated:
    case EventKind::block_shared:
    case EventKind::block_unshared:
    case EventKind::block_freed:
    case EventKind::block_cached:
    case EventKind::block_evicted:
    case EventKind::block_compacted:
    case EventKind::block_offloaded:
    case EventKind::block_reloaded:
        return true;
    default:
        return false;
    }
}

BlockState& BlockMapState::at(std::int32_t block) {
    if (static_cast<std::size_t>(block) >= blocks_.size()) {
        blocks_.resize(static_cast<std::size_t>(block) + 1);
    }
    return blocks_[static_cast<std::size_t>(block)];
}

void BlockMapState::drop_owner(std::int64_t request, std::int32_t block) {
    BlockState& b = at(block);
    // The most recent reference first: a request holds a block once.
    const auto owner = std::find(b.owners.begin(), b.owners.end(), request);
    if (owner != b.owners.end()) {
        b.owners.erase(owner);
    }
    const auto table = tables_.find(request);
    if (table == tables_.end()) {
        return;
    }
    std::vector<std::int32_t>& blocks = table->second;
    const auto entry = std::find(blocks.begin(), blocks.end(), block);
    if (entry != blocks.end()) {
        blocks.erase(entry);
    }
    if (blocks.empty()) {
        tables_.erase(table);
    }
}

void BlockMapState::mark_rolled_back(const events::EngineEvent& verified) {
    const auto v = events::as<events::DraftVerified>(verified);
    const std::vector<std::int32_t>& table = block_table(v.request);
    for (const std::int32_t block : table) {
        blocks_[static_cast<std::size_t>(block)].rolled_back = 0; // the latest verify only
    }
    // Blocks past the kept entries went back to the pool before this event;
    // the rejected slots left are those in the table's last block.
    for (std::int64_t entry = v.entries; entry < v.entries + (v.drafted - v.accepted); ++entry) {
        const std::int64_t index = entry / block_size_;
        if (block_size_ <= 0 || index >= static_cast<std::int64_t>(table.size())) {
            break;
        }
        ++blocks_[static_cast<std::size_t>(table[static_cast<std::size_t>(index)])].rolled_back;
    }
}

void BlockMapState::forget_saved(std::int32_t block) {
    BlockState& b = at(block);
    if (b.tier == BlockState::Tier::saved) {
        if (const auto it = saved_.find(b.hash); it != saved_.end() && it->second == block) {
            saved_.erase(it);
        }
    }
    b.tier = BlockState::Tier::none;
}

bool BlockMapState::apply(const events::EngineEvent& event) {
    if (event.kind == EventKind::draft_verified) {
        mark_rolled_back(event);
        return true;
    }
    if (event.kind == EventKind::tier_dropped) {
        const auto dropped = events::as<events::TierDropped>(event);
        tier_blocks_ = dropped.tier_blocks;
        // A block still caching that content no longer has it in the tier.
        if (const auto it = saved_.find(dropped.hash); it != saved_.end()) {
            BlockState& b = at(it->second);
            if (b.tier == BlockState::Tier::saved && b.hashed && b.hash == dropped.hash) {
                b.tier = BlockState::Tier::none;
            }
            saved_.erase(it);
        }
        return true;
    }
    if (!is_block_event(event.kind) || event.block < 0) {
        return false;
    }
    const std::int32_t block = event.block;
    BlockState& b = at(block);
    switch (event.kind) {
    case EventKind::block_allocated:
        // A fresh use: whatever the block cached before is gone.
        forget_saved(block);
        b = BlockState{};
        b.owners.push_back(event.request);
        tables_[event.request].push_back(block);
        break;
    case EventKind::block_shared:
        b.owners.push_back(event.request);
        ++b.reuses;
        tables_[event.request].push_back(block);
        break;
    case EventKind::block_unshared:
        drop_owner(event.request, block);
        break;
    case EventKind::block_freed: {
        // The last reference went: no owner is left, whoever the events
        // named (recordings from before block_unshared never dropped the
        // others).
        const std::vector<std::int64_t> owners = b.owners;
        for (const std::int64_t owner : owners) {
            drop_owner(owner, block);
        }
        drop_owner(event.request, block);
        b.rolled_back = 0;
        break;
    }
    case EventKind::block_cached: {
        const auto cached = events::as<events::BlockCached>(event);
        b.hashed = true;
        b.hash = cached.hash;
        b.cached_by = cached.request;
        b.first_token = static_cast<std::int32_t>(cached.first_token);
        break;
    }
    case EventKind::block_evicted:
        forget_saved(block); // its content is no longer what the tier holds
        b.hashed = false;
        b.hash = 0;
        b.cached_by = -1;
        b.first_token = -1;
        break;
    case EventKind::block_compacted:
        b.entries = static_cast<std::int32_t>(events::as<events::BlockCompacted>(event).entries);
        break;
    case EventKind::block_offloaded: {
        const auto saved = events::as<events::BlockOffloaded>(event);
        b.tier = BlockState::Tier::saved;
        tier_blocks_ = saved.tier_blocks;
        saved_[saved.hash] = block;
        break;
    }
    case EventKind::block_reloaded:
        b.tier = BlockState::Tier::loaded;
        tier_blocks_ = events::as<events::BlockReloaded>(event).tier_blocks;
        break;
    default:
        break;
    }
    return true;
}

BlockCounts BlockMapState::counts() const {
    BlockCounts counts;
    for (const BlockState& b : blocks_) {
        switch (b.use()) {
        case BlockUse::used:
            ++counts.used;
            counts.shared += b.ref_count() > 1 ? 1 : 0;
            break;
        case BlockUse::cached:
            ++counts.cached;
            break;
        case BlockUse::free:
            ++counts.free;
            break;
        }
    }
    return counts;
}

const std::vector<std::int32_t>& BlockMapState::block_table(std::int64_t request) const {
    static const std::vector<std::int32_t> none;
    const auto table = tables_.find(request);
    return table == tables_.end() ? none : table->second;
}

int BlockMapState::table_index(std::int64_t request, std::int32_t block) const {
    const std::vector<std::int32_t>& table = block_table(request);
    const auto entry = std::find(table.begin(), table.end(), block);
    return entry == table.end() ? -1 : static_cast<int>(entry - table.begin());
}

} // namespace kvscope::profiler
