// Every physical KV-cache block at one moment, rebuilt from the engine's block
// events alone: who references it, whether its hash is in the prefix cache,
// and which tokens it holds. Applying a run's events in order gives exactly
// the KV manager's state after each of them (tests check it against the
// engine), so a recording replays the block map of any moment.
#pragma once

#include "engine/events/engine_event.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace kvscope::profiler {

enum class BlockUse : std::uint8_t {
    free,   // on the free list: no owner, no cached content
    cached, // no owner, but its hash is in the prefix cache (reusable until evicted)
    used,   // referenced by one request or more
};

struct BlockState {
    std::vector<std::int64_t> owners; // requests referencing it, in the order they took it
    std::int32_t group = 0;           // the KV group that took it (kv_groups.h)
    bool hashed = false;              // its hash is registered in the prefix cache
    std::uint64_t hash = 0;           // valid when hashed
    std::int64_t cached_by = -1;      // the request whose tokens it caches (when hashed)
    std::int32_t first_token = -1;    // that request's first token in it (when hashed)
    std::int32_t entries = -1;        // entries left after token eviction rewrote it; -1: not
    std::int64_t reuses = 0;          // prefix-cache hits on it since it was last allocated
    // Slots at its end holding draft tokens that verification rejected
    // (speculative decoding) in its owner's latest verify: rolled back, the
    // next step writes over them.
    std::int32_t rolled_back = 0;
    // The offload tier: its content was saved there (write-through keeps a
    // cached block in both tiers), or loaded back from there.
    enum class Tier : std::uint8_t { none, saved, loaded };
    Tier tier = Tier::none;

    BlockUse use() const;
    int ref_count() const { return static_cast<int>(owners.size()); }
};

struct BlockCounts {
    int used = 0;
    int cached = 0;
    int free = 0;
    int shared = 0; // used by more than one request
};

class BlockMapState {
public:
    explicit BlockMapState(int blocks = 0, int block_size = 16);

    // Applies `event` when it is a block event (allocated, shared, unshared,
    // freed, cached, evicted, compacted, offloaded, reloaded), a
    // draft_verified (its rolled-back slots) or a tier_dropped and returns
    // true; false otherwise.
    // Unknown block ids grow the map rather than fail.
    bool apply(const events::EngineEvent& event);

    int block_size() const { return block_size_; }
    const std::vector<BlockState>& blocks() const { return blocks_; }
    BlockCounts counts() const;
    // Per KV group (as many as the highest group seen, at least one).
    std::vector<BlockCounts> counts_by_group() const;
    // The blocks `request` references in KV group `group`'s table, in
    // table order (empty: none); kv::kNoBlock (-1) where the group's
    // window let blocks go.
    std::vector<std::int32_t> block_table(std::int64_t request, int group = 0) const;
    // Where `block` sits in `request`'s table of its group; -1 when it does not.
    int table_index(std::int64_t request, std::int32_t block) const;
    // The block just before `block` in that same table; -1 when it is first,
    // its predecessor left a window, or `block` is not in the table.
    std::int32_t block_before(std::int64_t request, std::int32_t block) const;
    // Blocks in the offload tier, as its latest copy said (0: none yet).
    std::int64_t tier_blocks() const { return tier_blocks_; }

    static bool is_block_event(events::EventKind kind);

private:
    BlockState& at(std::int32_t block);
    // `left_window`: a sliding group let the block go from its table's front.
    void drop_owner(std::int64_t request, std::int32_t block, bool left_window = false);
    void add_to_table(std::int64_t request, std::int32_t block);
    void mark_rolled_back(const events::EngineEvent& verified);
    // `block`'s content changes: it loses its tier mark and saved_ entry.
    void forget_saved(std::int32_t block);

    int block_size_ = 16;
    std::vector<BlockState> blocks_;
    std::int64_t tier_blocks_ = 0;
    // The block each hash in the tier was saved from while that block still
    // caches it (so at most one entry per block), so a tier_dropped clears
    // its mark.
    std::unordered_map<std::uint64_t, std::int32_t> saved_;
    // A request's table of one group: the blocks it holds, after `offset`
    // entries its window let go.
    struct GroupTable {
        std::int32_t offset = 0;
        std::vector<std::int32_t> blocks;
    };
    // Per request, per group.
    std::unordered_map<std::int64_t, std::vector<GroupTable>> tables_;
    // `request`'s table of `block`'s group; nullptr when there is none.
    const GroupTable* table_holding(std::int64_t request, std::int32_t block) const;
};

} // namespace kvscope::profiler
