// The cache state an attached source's events imply, and nothing more: the
// block hashes resident per (data-parallel rank, medium), each with the
// parent hash, token ids, block size and time it was stored with, and the
// prefix forest those parent hashes draw. Events say nothing about physical
// block ids, owning requests, reference counts or partial blocks, so neither
// does this.
//
// BlockStored adds (a hash stored again while resident replaces its entry:
// the publisher's latest word wins), BlockRemoved removes (a hash that is not
// resident is counted, not an error: we may have attached after it was
// stored), AllBlocksCleared empties every tier of the source, and clear()
// does the same when the source restarted.
#pragma once

#include "profiler/attach/block_hash.h"
#include "profiler/attach/kv_events.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kvscope::attach {

struct ResidentBlock {
    BlockHash hash{};
    std::optional<BlockHash> parent{};     // none: the first block of a prompt
    std::vector<std::int64_t> token_ids{}; // this block's share of the event's tokens
    std::int64_t block_size = 0;
    std::optional<std::int64_t> lora_id{};
    std::optional<std::int64_t> group_idx{};
    double stored_at = 0; // the publisher's batch timestamp, seconds since the epoch
    bool operator==(const ResidentBlock&) const = default;
};

// A cache tier of one rank: vLLM's GPU, CPU, DISK ... media.
struct TierKey {
    std::int64_t rank = 0; // a batch without a rank counts as rank 0
    std::string medium;
    auto operator<=>(const TierKey&) const = default;
};

struct ResidencyCounts {
    std::int64_t stored = 0;          // blocks stored (re-stores included)
    std::int64_t restored = 0;        // of those, hashes that were already resident
    std::int64_t removed = 0;         // resident blocks removed
    std::int64_t moved = 0;           // resident blocks moved to another tier
    std::int64_t unknown_removed = 0; // removals of hashes that were not resident
    std::int64_t clears = 0;          // AllBlocksCleared events
    std::int64_t resets = 0;          // clear() calls (source restarts, events lost)
    bool operator==(const ResidencyCounts&) const = default;
};

// One tree of a tier's prefix forest: a root (roots()) and every resident
// block that continues it.
struct PrefixTree {
    BlockHash root{};
    std::int64_t blocks = 0; // the root included
    std::int64_t depth = 0;  // blocks on the longest chain from the root
    std::int64_t tokens = 0; // token ids the tree's blocks carry
};

class ResidentBlocks {
public:
    // No parent -> children index is kept: at 100,000 events a second its
    // upkeep (a set per parent, touched by every store and removal) cost
    // more than the blocks themselves, while the forest is read about once
    // a second by a view. The queries below that need it build it, O(blocks).
    struct Tier {
        std::unordered_map<BlockHash, ResidentBlock> blocks;
    };

    void apply(const KvEventBatch& batch);
    void apply(const KvEvent& event, std::int64_t rank, double ts);
    // The source restarted: everything it told us is void.
    void clear();

    const std::map<TierKey, Tier>& tiers() const { return tiers_; }
    const Tier* tier(const TierKey& key) const;
    const ResidentBlock* find(const TierKey& key, const BlockHash& hash) const;
    // Resident children of `parent` in that tier, in no particular order (a
    // parent need not be resident itself). A scan of the tier: for views.
    std::vector<BlockHash> children(const TierKey& key, const BlockHash& parent) const;
    // Resident blocks whose parent is absent or not resident in the tier: the
    // roots of the prefix forest as far as we can see it.
    std::vector<BlockHash> roots(const TierKey& key) const;
    // The tier's prefix trees, largest first (ties: deeper first).
    std::vector<PrefixTree> trees(const TierKey& key) const;
    // Every resident block of the tier, tree by tree (largest first), each
    // tree depth-first from its root, with the index of its tree in trees():
    // a prefix and its continuations side by side.
    std::vector<std::pair<BlockHash, std::int32_t>> in_tree_order(const TierKey& key) const;
    // The token ids from the root down to `hash` (its ancestors resident in
    // the tier, then its own): the prefix the block completes, as far as we see.
    std::vector<std::int64_t> prefix_tokens(const TierKey& key, const BlockHash& hash) const;
    std::size_t size() const; // resident blocks over all tiers
    const ResidencyCounts& counts() const { return counts_; }

private:
    void store(const StoredBlocks& event, std::int64_t rank, double ts);
    void remove(const RemovedBlocks& event, std::int64_t rank);
    void move(const MovedBlocks& event, std::int64_t rank);
    // Adds `block` to `tier`, replacing an entry of the same hash; true when
    // it replaced one.
    static bool insert(Tier& tier, ResidentBlock block);

    std::map<TierKey, Tier> tiers_;
    ResidencyCounts counts_;
};

} // namespace kvscope::attach
