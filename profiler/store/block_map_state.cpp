#include "profiler/store/block_map_state.h"

#include "engine/events/typed_events.h"

#include <algorithm>

namespace kvscope::profiler {

using events::EventKind;

namespace {
// More KV groups than any model has layers: a group number past it is a
// damaged recording's.
constexpr std::int32_t kMaxGroup = 4096;
} // namespace

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

void BlockMapState::add_to_table(std::int64_t request, std::int32_t block) {
    const BlockState& b = at(block);
    std::vector<GroupTable>& groups = tables_[request];
    if (groups.size() <= static_cast<std::size_t>(b.group)) {
        groups.resize(static_cast<std::size_t>(b.group) + 1);
    }
    GroupTable& table = groups[static_cast<std::size_t>(b.group)];
    if (table.blocks.empty() && b.hashed && b.first_token >= 0) {
        // A prefix hit starts the table: a sliding group's first hit sits
        // after the entries its window does not need (the same place as in
        // the request that cached it: prefixes share positions).
        table.offset = b.first_token / block_size_;
    }
    table.blocks.push_back(block);
}

void BlockMapState::drop_owner(std::int64_t request, std::int32_t block, bool left_window) {
    BlockState& b = at(block);
    // The most recent reference first: a request holds a block once.
    const auto owner = std::find(b.owners.begin(), b.owners.end(), request);
    if (owner != b.owners.end()) {
        b.owners.erase(owner);
    }
    const auto found = tables_.find(request);
    if (found == tables_.end() || found->second.size() <= static_cast<std::size_t>(b.group)) {
        return;
    }
    GroupTable& table = found->second[static_cast<std::size_t>(b.group)];
    const auto entry = std::find(table.blocks.begin(), table.blocks.end(), block);
    if (entry != table.blocks.end()) {
        table.offset += left_window && entry == table.blocks.begin() ? 1 : 0;
        table.blocks.erase(entry);
    }
    // A window can let go of every block its table holds while the request
    // goes on (a window shorter than a block): its place is kept for the
    // next. Any other last drop ends the table.
    if (table.blocks.empty() && !left_window) {
        table.offset = 0;
    }
    if (!left_window && std::all_of(found->second.begin(), found->second.end(),
                                    [](const GroupTable& t) { return t.blocks.empty(); })) {
        tables_.erase(found);
    }
}

void BlockMapState::mark_rolled_back(const events::EngineEvent& verified) {
    const auto v = events::as<events::DraftVerified>(verified);
    const auto found = tables_.find(v.request);
    const std::size_t groups = found == tables_.end() ? 1 : found->second.size();
    // Every group's table of a hybrid cache holds the draft's slots.
    for (std::size_t g = 0; g < groups; ++g) {
        const std::vector<std::int32_t> table = block_table(v.request, static_cast<int>(g));
        for (const std::int32_t block : table) {
            if (block >= 0) {
                blocks_[static_cast<std::size_t>(block)].rolled_back = 0; // the latest verify only
            }
        }
        // Blocks past the kept entries went back to the pool before this
        // event; the rejected slots left are those in the table's last block.
        for (std::int64_t entry = v.entries; entry < v.entries + (v.drafted - v.accepted);
             ++entry) {
            const std::int64_t index = entry / block_size_;
            if (block_size_ <= 0 || index >= static_cast<std::int64_t>(table.size()) ||
                table[static_cast<std::size_t>(index)] < 0) {
                break;
            }
            ++blocks_[static_cast<std::size_t>(table[static_cast<std::size_t>(index)])].rolled_back;
        }
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
        b.group = events::as<events::BlockAllocated>(event).group;
        if (b.group < 0 || b.group > kMaxGroup) {
            b.group = 0; // a damaged row: no cache has that group
        }
        add_to_table(event.request, block);
        break;
    case EventKind::block_shared:
        b.owners.push_back(event.request);
        ++b.reuses;
        add_to_table(event.request, block);
        break;
    case EventKind::block_unshared:
        drop_owner(event.request, block, events::as<events::BlockUnshared>(event).left_window);
        break;
    case EventKind::block_freed: {
        // The last reference went: no owner is left, whoever the events
        // named (recordings from before block_unshared never dropped the
        // others).
        const std::vector<std::int64_t> owners = b.owners;
        const bool left_window = events::as<events::BlockFreed>(event).left_window;
        for (const std::int64_t owner : owners) {
            drop_owner(owner, block, left_window && owner == event.request);
        }
        drop_owner(event.request, block, left_window);
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

std::vector<BlockCounts> BlockMapState::counts_by_group() const {
    std::vector<BlockCounts> counts(1);
    for (const BlockState& b : blocks_) {
        const BlockUse use = b.use();
        if (use == BlockUse::free) {
            ++counts[0].free; // a free block has no group: counted once, in the first
            continue;
        }
        if (counts.size() <= static_cast<std::size_t>(b.group)) {
            counts.resize(static_cast<std::size_t>(b.group) + 1);
        }
        BlockCounts& c = counts[static_cast<std::size_t>(b.group)];
        if (use == BlockUse::used) {
            ++c.used;
            c.shared += b.ref_count() > 1 ? 1 : 0;
        } else {
            ++c.cached;
        }
    }
    return counts;
}

std::vector<std::int32_t> BlockMapState::block_table(std::int64_t request, int group) const {
    const auto found = tables_.find(request);
    if (found == tables_.end() || found->second.size() <= static_cast<std::size_t>(group)) {
        return {};
    }
    const GroupTable& table = found->second[static_cast<std::size_t>(group)];
    std::vector<std::int32_t> entries(static_cast<std::size_t>(table.offset), -1);
    entries.insert(entries.end(), table.blocks.begin(), table.blocks.end());
    return entries;
}

const BlockMapState::GroupTable* BlockMapState::table_holding(std::int64_t request,
                                                              std::int32_t block) const {
    const auto found = tables_.find(request);
    if (found == tables_.end() || block < 0 || static_cast<std::size_t>(block) >= blocks_.size()) {
        return nullptr;
    }
    const auto group = static_cast<std::size_t>(blocks_[static_cast<std::size_t>(block)].group);
    return group < found->second.size() ? &found->second[group] : nullptr;
}

int BlockMapState::table_index(std::int64_t request, std::int32_t block) const {
    const GroupTable* table = table_holding(request, block);
    if (table == nullptr) {
        return -1;
    }
    const auto entry = std::find(table->blocks.begin(), table->blocks.end(), block);
    return entry == table->blocks.end()
               ? -1
               : table->offset + static_cast<int>(entry - table->blocks.begin());
}

std::int32_t BlockMapState::block_before(std::int64_t request, std::int32_t block) const {
    // The block's own group's table, whatever group an event claims: a
    // damaged recording can name another (fuzz_recording_rows found one).
    const GroupTable* table = table_holding(request, block);
    if (table == nullptr) {
        return -1;
    }
    const auto entry = std::find(table->blocks.begin(), table->blocks.end(), block);
    return entry == table->blocks.end() || entry == table->blocks.begin() ? -1 : *(entry - 1);
}

} // namespace kvscope::profiler
