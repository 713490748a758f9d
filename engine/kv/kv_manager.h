// The KV block manager: hands out physical blocks, shares full blocks between
// requests through prefix caching, and keeps unreferenced cached blocks for
// reuse until an allocation needs them. Pure bookkeeping, no tensors (the
// backend owns those), so it is testable on its own and shared by backends.
//
// A block is in exactly one of three states:
//   used    ref count > 0, in one or more block tables;
//   cached  ref count 0 but holding a registered hash, in the reclaim order;
//   free    ref count 0, no hash, in the free queue.
// Allocation takes free blocks first, then reclaims the cached block the
// cache policy picks (cache_policy.h: LRU or LFU).
//
// A hybrid cache (kv_groups.h) gives each request one table per KV group
// from the same pool. A block belongs to the group that took it until it is
// freed; its prefix-cache entry is the group's. A sliding-window group lets
// go of the blocks its window has left (release_outside_window), which stay
// cached for prefix hits, and a prefix hit needs every group: the
// whole-context groups all its blocks, a sliding group those of the window
// before the first token computed.
#pragma once

#include "engine/events/engine_event.h"
#include "engine/kv/block_allocator.h"
#include "engine/kv/block_hash.h"
#include "engine/kv/block_queue.h"
#include "engine/kv/cache_policy.h"

#include <absl/container/flat_hash_map.h>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kvscope::kv {

// What the prefix cache gave a new request.
struct PrefixMatch {
    std::int32_t hit_tokens = 0; // tokens whose K/V come from cached blocks
    std::int32_t blocks_hit = 0;
    std::int32_t blocks_missed = 0; // blocks (partial included) left to compute
    // Tokens after the hit that equal the start of a cached block but are too
    // few to fill a block (or would cover the last prompt token), so they
    // are computed again: what a block-granular cache cannot share.
    std::int32_t shared_short_tokens = 0;
    // Of blocks_hit, those found in the second tier and loaded back.
    std::int32_t tier_blocks_hit = 0;
};

// Moves blocks' bytes between the pool and a second tier (offload_tier.h)
// for the KV manager, which knows only which hashes the tier holds.
class TierMover {
public:
    virtual ~TierMover() = default;
    // Saves `block`'s K/V under `hash` (the block is full and about to be
    // reused, or just cached under write-through), and says so
    // (block_offloaded). False when it could not (the tier's disk is full):
    // the tier does not hold the hash then.
    virtual bool offload(std::int64_t request, BlockId block, BlockHash hash) = 0;
    // Loads the K/V stored under `hash` into `block`, freshly allocated for
    // a prefix hit in the tier, and says so (block_reloaded). False when the
    // tier no longer holds it.
    virtual bool reload(std::int64_t request, BlockId block, BlockHash hash) = 0;
    // Makes `hash` the tier's most recently used (a hit about to be loaded).
    virtual void touch(BlockHash hash) = 0;
};

struct KvManagerStats {
    int used = 0;
    int cached = 0;
    int free = 0;
    int total = 0;
    // Per KV group: blocks in use and cached (free blocks have no group).
    std::vector<int> used_by_group;
    std::vector<int> cached_by_group;
};

class KvManager {
public:
    // `group_windows`: per KV group, the window its layers attend over (0:
    // the whole context); one whole-context group is a plain cache.
    KvManager(int num_blocks, int block_size, bool prefix_caching,
              CachePolicy policy = CachePolicy::lru, std::vector<std::int32_t> group_windows = {0});

    int block_size() const { return block_size_; }
    int total_blocks() const { return static_cast<int>(blocks_.size()); }
    bool prefix_caching() const { return prefix_caching_; }
    CachePolicy cache_policy() const { return cached_.policy(); }
    int groups() const { return static_cast<int>(windows_.size()); }
    // Tokens one sequence may hold when steps give it at most `step_tokens`
    // new tokens: the most whose blocks, at the step that needs the most,
    // fit the whole pool. A plain cache holds a sequence's every block; a
    // hybrid one holds a sliding group's window and the step's tokens
    // (admission and growth go chunk by chunk there), so a sequence held
    // alone, preempted and resumed with all it generated, always fits again.
    std::int64_t tokens_per_sequence(std::int32_t step_tokens) const;
    // Blocks a sequence of `tokens` tokens holds at most, in all groups
    // together, when steps give it at most `step_tokens` new tokens.
    std::int64_t peak_blocks(std::int64_t tokens, std::int32_t step_tokens) const;
    std::int32_t window(int group) const { return windows_[static_cast<std::size_t>(group)]; }
    bool hybrid() const { return windows_.size() > 1; }
    // Blocks an allocation can take now (free plus cached).
    int available_blocks() const { return static_cast<int>(free_.size() + cached_.size()); }
    // Blocks on the free list alone: taking them evicts nothing cached.
    int free_blocks() const { return static_cast<int>(free_.size()); }
    KvManagerStats stats() const;

    void set_event_sink(events::EventSink* sink) { sink_ = sink; }

    // A second tier for blocks the pool lets go (null: none). Cached blocks
    // are offloaded when reclaimed, or as soon as they are cached with
    // `write_through`; a prefix lookup that misses the pool continues in
    // the tier, and its hits are loaded back into fresh blocks.
    void set_tier(TierMover* mover, bool write_through) {
        tier_mover_ = mover;
        write_through_ = write_through;
    }
    // The tier dropped `hash` (it was full): lookups stop finding it there.
    void forget_tier_hash(BlockHash hash) { tier_.erase(hash); }
    std::int64_t tier_blocks() const { return static_cast<std::int64_t>(tier_.size()); }
    // The hashes lookups find in the tier (for invariant checks).
    std::vector<BlockHash> tier_hashes() const;

    // Looks up the longest cached prefix of `tokens` (whole blocks, at most
    // tokens.size() - 1 tokens so the last one is computed for its logits),
    // without changing anything.
    PrefixMatch match_prefix(std::span<const std::int32_t> tokens,
                             std::uint64_t extra_key = 0) const;

    // Starts `sequence` (empty) on `tokens`: takes the cached prefix blocks
    // match_prefix() finds and sets sequence.length to the hit. A plain
    // cache reserves the whole prompt's blocks at once; a hybrid one those of
    // the hit and the first `first_step_tokens` tokens after it (the rest
    // comes through grow() a chunk at a time, as vLLM's hybrid manager
    // allocates, so a sliding group never holds a long prompt whole), and
    // only when the pool could hold the prompt at its busiest step, steps
    // being at most `step_tokens` (0: `first_step_tokens`).
    // Returns the match, or nullopt when the blocks cannot be had (the
    // sequence stays empty; blocks loaded back from the tier before one
    // found lost stay cached in the pool).
    std::optional<PrefixMatch> admit(std::int64_t request, SequenceBlocks& sequence,
                                     std::span<const std::int32_t> tokens,
                                     std::uint64_t extra_key = 0,
                                     std::int32_t first_step_tokens = kWholePrompt,
                                     std::int32_t step_tokens = 0);
    static constexpr std::int32_t kWholePrompt = std::numeric_limits<std::int32_t>::max();

    // Grows `sequence` to hold `new_length` tokens, in every group. All or
    // nothing.
    bool grow(std::int64_t request, SequenceBlocks& sequence, std::int32_t new_length);
    // Blocks grow() would need (in all groups together).
    int blocks_needed(const SequenceBlocks& sequence, std::int32_t new_length) const;

    // Lets each sliding-window group of `sequence` go of the blocks no
    // query from its next token (at sequence.length) on can attend: those
    // whose every entry lies more than the window behind it. They become
    // cached (or free) as a finished request's would; their table entries
    // kNoBlock. Returns the blocks that became free or cached.
    std::vector<BlockId> release_outside_window(std::int64_t request, SequenceBlocks& sequence);
    // The first block of `group` that a query at `position` still attends.
    int first_block_in_window(int group, std::int32_t position) const;

    // After a step computed K/V up to `computed` tokens of `tokens` (the
    // sequence's whole token list), registers the newly full blocks' hashes
    // so later requests can share them.
    void cache_full_blocks(std::int64_t request, SequenceBlocks& sequence,
                           std::span<const std::int32_t> tokens, std::int32_t computed,
                           std::uint64_t extra_key = 0);

    // Drops `sequence`'s references, last block first, so its tail is the
    // first to be evicted. Returns the blocks that became free or cached.
    std::vector<BlockId> release(std::int64_t request, SequenceBlocks& sequence);

    // For compaction after token eviction, which rewrites blocks [first,
    // last) of the table: gives the sequence private blocks there. A block
    // others share is replaced by a fresh one (its id comes back in the
    // result, to be dropped once its content is copied); a block only the
    // prefix cache also holds just leaves the cache. nullopt, changing
    // nothing, when the pool cannot supply the fresh blocks.
    std::optional<std::vector<BlockId>> make_private(std::int64_t request, SequenceBlocks& sequence,
                                                     int first, int last);
    // Drops one reference to each of `blocks`; returns those now free or cached.
    std::vector<BlockId> drop(std::int64_t request, std::span<const BlockId> blocks);
    // Shrinks the table to `blocks` entries, last block first; returns the
    // blocks now free or cached.
    std::vector<BlockId> truncate(std::int64_t request, SequenceBlocks& sequence, int blocks);

    // Checks the invariants against every live block table: ref counts equal
    // the references; used + cached + free = total; nothing free or cached is
    // referenced; both indexes of cached blocks hold exactly the hashed
    // blocks under their keys; every table holds its own group's blocks, as
    // many as group 0's; a sliding group holds no block outside its window.
    // Empty when all hold, else what is wrong.
    std::string check(std::span<const SequenceBlocks* const> sequences) const;

    int ref_count(BlockId block) const { return blocks_.at(static_cast<std::size_t>(block)).ref; }
    // The group that took `block` (meaningful while it is used or cached).
    int group_of(BlockId block) const { return blocks_.at(static_cast<std::size_t>(block)).group; }

private:
    struct Block {
        int ref = 0;
        bool hashed = false;
        BlockHash hash = 0;
        BlockHash parent = 0;
        std::int64_t uses = 0; // references in its life: the LFU policy's count
        int group = 0;         // the KV group that took it
        // Its neighbours among the cached blocks of the same child_key.
        BlockId prev_sibling = BlockQueue::kNone;
        BlockId next_sibling = BlockQueue::kNone;
    };

    // match_prefix(), also appending each hit block's hash to `hashes` and,
    // when asked for, its id to `hits` (kTierHit for a hit in the tier).
    PrefixMatch find_prefix(std::span<const std::int32_t> tokens, std::uint64_t extra_key,
                            std::vector<BlockId>* hits, std::vector<BlockHash>& hashes) const;
    // How many of `rest`'s first tokens a cached group-0 child of `parent`
    // holds: a prefix shared but shorter than a block.
    std::int32_t shared_short_tokens(BlockHash parent, std::span<const std::int32_t> rest,
                                     std::uint64_t extra_key) const;
    // A hybrid cache's prefix match: per group, the table of hits (kNoBlock
    // before a sliding group's window), and the chain's hashes.
    PrefixMatch find_group_prefix(std::span<const std::int32_t> tokens, std::uint64_t extra_key,
                                  std::vector<std::vector<BlockId>>* hits,
                                  std::vector<BlockHash>& hashes) const;
    std::optional<PrefixMatch> admit_groups(std::int64_t request, SequenceBlocks& sequence,
                                            std::span<const std::int32_t> tokens,
                                            std::uint64_t extra_key, std::int32_t first_step_tokens,
                                            std::int32_t step_tokens);
    std::optional<BlockId> take_block(std::int64_t request, int group = 0);
    // Saves a full hashed block to the tier unless it holds the hash already.
    void offload(std::int64_t request, BlockId block);
    // A prefix hit, in two halves: a pin keeps the block out of the reclaim
    // order, unsaid; take_pinned() says so (block_shared). unpin() undoes a
    // pin never taken (the block rejoins the reclaim order as its most
    // recently used). admit() counts the uses once the admission sticks.
    void pin(BlockId block);
    void take_pinned(std::int64_t request, BlockId block);
    void unpin(BlockId block);
    void unreference(std::int64_t request, BlockId block, std::vector<BlockId>& released,
                     bool left_window = false);
    void register_hash(BlockId block, BlockHash hash, BlockHash parent,
                       std::span<const std::int32_t> tokens);
    void forget_hash(BlockId block);
    std::optional<BlockId> find_cached(BlockHash hash, std::span<const std::int32_t> tokens,
                                       int group = 0) const;
    // The key a group's block is cached under: group 0's is the chain's
    // hash itself (so a plain cache is as before), the others' a mix of it.
    static BlockHash group_hash(BlockHash hash, int group) {
        return group == 0 ? hash
                          : (hash ^ (0xC2B2AE3D27D4EB4Full * static_cast<std::uint64_t>(group))) *
                                0x9E3779B97F4A7C15ull;
    }
    // Counts a block's move between used, cached and free in its group's tallies.
    void count_block(BlockId block, int used, int cached);
    bool in_tier(BlockHash hash, std::span<const std::int32_t> tokens) const;
    static constexpr BlockId kTierHit = -1;
    // A hashed block's tokens (compared on every hit, so a 64-bit hash
    // collision can never share wrong K/V).
    std::span<const std::int32_t> tokens_of(BlockId block) const {
        return {block_tokens_.data() + static_cast<std::size_t>(block) * block_size_,
                static_cast<std::size_t>(block_size_)};
    }
    static BlockHash child_key(BlockHash parent, std::int32_t first_token) {
        return (parent ^ static_cast<std::uint32_t>(first_token)) * 0x9E3779B97F4A7C15ull;
    }

    int block_size_;
    bool prefix_caching_;
    std::vector<std::int32_t> windows_; // per group
    std::vector<int> used_by_group_;
    std::vector<int> cached_by_group_;
    std::vector<Block> blocks_;
    std::vector<std::int32_t> block_tokens_; // block_size_ per block
    BlockQueue free_;                        // front: next to take
    ReclaimOrder cached_;
    // Open-addressing maps (abseil's): a trace replay looks a block up,
    // inserts and erases it millions of times, and node-based maps spent
    // most of its time in cache misses and allocation.
    // One cached block per hash: a second block with the same hash (a twin
    // computed at the same time, or a collision) stays private.
    absl::flat_hash_map<BlockHash, BlockId> by_hash_;
    // Cached blocks by parent hash and first token (child_key), each key the
    // head of a sibling list through the blocks: every prompt's first block
    // has the same parent, so the parent alone would make one list of
    // thousands, walked at each admission.
    absl::flat_hash_map<BlockHash, BlockId> by_parent_;
    events::EventSink* sink_ = nullptr;
    // The second tier's hashes, with what a lookup compares (as for the
    // pool's cached blocks: a collision never loads wrong K/V).
    struct TierEntry {
        std::vector<std::int32_t> tokens;
    };
    absl::flat_hash_map<BlockHash, TierEntry> tier_;
    TierMover* tier_mover_ = nullptr;
    bool write_through_ = false;
};

} // namespace kvscope::kv
