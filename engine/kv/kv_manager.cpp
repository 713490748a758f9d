#include "engine/kv/kv_manager.h"

#include "engine/events/typed_events.h"

#include <algorithm>
#include <stdexcept>

namespace kvscope::kv {

KvManager::KvManager(int num_blocks, int block_size, bool prefix_caching)
    : block_size_(block_size)
    , prefix_caching_(prefix_caching)
    , blocks_(static_cast<std::size_t>(std::max(0, num_blocks))) {
    if (num_blocks <= 0 || block_size <= 0) {
        throw std::invalid_argument("the KV cache needs a positive block count and block size");
    }
    for (BlockId b = 0; b < num_blocks; ++b) {
        free_.push_back(b);
        blocks_[static_cast<std::size_t>(b)].in_free = true;
    }
}

KvManagerStats KvManager::stats() const {
    KvManagerStats s;
    s.total = total_blocks();
    s.free = static_cast<int>(free_.size());
    s.cached = static_cast<int>(lru_.size());
    s.used = s.total - s.free - s.cached;
    return s;
}

std::optional<BlockId> KvManager::find_cached(BlockHash hash,
                                              std::span<const std::int32_t> tokens) const {
    const auto [first, last] = by_hash_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
        const Block& block = blocks_[static_cast<std::size_t>(it->second)];
        if (std::equal(block.tokens.begin(), block.tokens.end(), tokens.begin(), tokens.end())) {
            return it->second;
        }
    }
    return std::nullopt;
}

PrefixMatch KvManager::match_prefix(std::span<const std::int32_t> tokens,
                                    std::uint64_t extra_key) const {
    PrefixMatch match;
    const auto total_blocks = static_cast<std::int32_t>(
        (static_cast<std::int64_t>(tokens.size()) + block_size_ - 1) / block_size_);
    if (!prefix_caching_ || tokens.empty()) {
        match.blocks_missed = total_blocks;
        return match;
    }
    // At most tokens.size() - 1 tokens: the last is computed for its logits.
    const auto hittable = static_cast<std::int32_t>((tokens.size() - 1) / block_size_);
    BlockHash parent = kRootBlockHash;
    std::int32_t b = 0;
    for (; b < hittable; ++b) {
        const auto block_tokens = tokens.subspan(static_cast<std::size_t>(b) * block_size_,
                                                 static_cast<std::size_t>(block_size_));
        const BlockHash hash = hash_block(parent, block_tokens, extra_key);
        if (!find_cached(hash, block_tokens)) {
            break;
        }
        parent = hash;
    }
    match.blocks_hit = b;
    match.hit_tokens = b * block_size_;
    match.blocks_missed = total_blocks - b;
    // How far the next tokens agree with any cached child of the last hit:
    // a prefix shared but shorter than a block (or cut by the last token).
    const auto rest = tokens.subspan(static_cast<std::size_t>(match.hit_tokens));
    std::int32_t longest = 0;
    if (rest.empty()) {
        match.shared_short_tokens = 0;
        return match;
    }
    // Only children that begin with the next token can agree with it at all.
    const auto [first, last] = by_parent_.equal_range(child_key(parent, rest.front()));
    for (auto it = first; it != last; ++it) {
        const Block& block = blocks_[static_cast<std::size_t>(it->second)];
        if (hash_block(parent, block.tokens, extra_key) != block.hash) {
            continue; // another extra key
        }
        const auto n = std::min(block.tokens.size(), rest.size());
        const auto mismatch = std::mismatch(
            rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n), block.tokens.begin());
        longest = std::max(longest, static_cast<std::int32_t>(mismatch.first - rest.begin()));
    }
    match.shared_short_tokens = longest;
    return match;
}

std::optional<BlockId> KvManager::take_block(std::int64_t request) {
    BlockId block;
    if (!free_.empty()) {
        block = free_.front();
        free_.pop_front();
        blocks_[static_cast<std::size_t>(block)].in_free = false;
    } else if (!lru_.empty()) {
        block = lru_.front();
        lru_.pop_front();
        Block& evicted = blocks_[static_cast<std::size_t>(block)];
        evicted.in_lru = false;
        forget_hash(block);
        events::emit_now(sink_, events::BlockEvicted{.block = block, .request = request});
    } else {
        return std::nullopt;
    }
    blocks_[static_cast<std::size_t>(block)].ref = 1;
    events::emit_now(sink_, events::BlockAllocated{.block = block, .request = request});
    return block;
}

void KvManager::forget_hash(BlockId block) {
    Block& b = blocks_[static_cast<std::size_t>(block)];
    const auto drop = [block](std::unordered_multimap<BlockHash, BlockId>& map, BlockHash key) {
        const auto [first, last] = map.equal_range(key);
        for (auto it = first; it != last; ++it) {
            if (it->second == block) {
                map.erase(it);
                return;
            }
        }
    };
    drop(by_hash_, b.hash);
    drop(by_parent_, child_key(b.parent, b.tokens.front()));
    b.hashed = false;
    b.tokens.clear();
}

void KvManager::reference(std::int64_t request, BlockId block) {
    Block& b = blocks_[static_cast<std::size_t>(block)];
    if (b.in_lru) {
        lru_.erase(b.lru_position);
        b.in_lru = false;
    }
    ++b.ref;
    events::emit_now(sink_, events::BlockShared{.block = block, .request = request});
}

int KvManager::blocks_needed(const SequenceBlocks& sequence, std::int32_t new_length) const {
    const auto needed =
        static_cast<int>((static_cast<std::int64_t>(new_length) + block_size_ - 1) / block_size_);
    return std::max(0, needed - static_cast<int>(sequence.block_table.size()));
}

std::optional<PrefixMatch> KvManager::admit(std::int64_t request, SequenceBlocks& sequence,
                                            std::span<const std::int32_t> tokens,
                                            std::uint64_t extra_key) {
    if (!sequence.block_table.empty()) {
        throw std::logic_error("admit() needs an empty sequence");
    }
    const PrefixMatch match = match_prefix(tokens, extra_key);
    // Hit blocks sitting in the LRU queue are not available for the rest.
    int hit_in_lru = 0;
    std::vector<BlockId> hits;
    BlockHash parent = kRootBlockHash;
    for (std::int32_t b = 0; b < match.blocks_hit; ++b) {
        const auto block_tokens = tokens.subspan(static_cast<std::size_t>(b) * block_size_,
                                                 static_cast<std::size_t>(block_size_));
        const BlockHash hash = hash_block(parent, block_tokens, extra_key);
        const BlockId block = *find_cached(hash, block_tokens);
        hit_in_lru += blocks_[static_cast<std::size_t>(block)].in_lru ? 1 : 0;
        hits.push_back(block);
        sequence.block_hashes.push_back(hash);
        parent = hash;
    }
    if (match.blocks_missed > available_blocks() - hit_in_lru) {
        sequence.block_hashes.clear();
        return std::nullopt;
    }
    for (const BlockId block : hits) {
        reference(request, block);
        sequence.block_table.push_back(block);
    }
    sequence.length = match.hit_tokens;
    if (!grow(request, sequence, static_cast<std::int32_t>(tokens.size()))) {
        throw std::logic_error("KV manager: blocks counted free were not");
    }
    return match;
}

bool KvManager::grow(std::int64_t request, SequenceBlocks& sequence, std::int32_t new_length) {
    const int needed = blocks_needed(sequence, new_length);
    if (needed > available_blocks()) {
        return false;
    }
    for (int i = 0; i < needed; ++i) {
        sequence.block_table.push_back(*take_block(request));
    }
    return true;
}

void KvManager::cache_full_blocks(std::int64_t request, SequenceBlocks& sequence,
                                  std::span<const std::int32_t> tokens, std::int32_t computed,
                                  std::uint64_t extra_key) {
    if (!prefix_caching_ || !sequence.cacheable) {
        return;
    }
    const auto full = static_cast<std::size_t>(
        std::min<std::int64_t>(computed, static_cast<std::int64_t>(tokens.size())) / block_size_);
    while (sequence.block_hashes.size() < full) {
        const std::size_t b = sequence.block_hashes.size();
        const BlockHash parent = b == 0 ? kRootBlockHash : sequence.block_hashes[b - 1];
        const auto block_tokens = tokens.subspan(b * static_cast<std::size_t>(block_size_),
                                                 static_cast<std::size_t>(block_size_));
        const BlockHash hash = hash_block(parent, block_tokens, extra_key);
        sequence.block_hashes.push_back(hash);
        const BlockId id = sequence.block_table[b];
        Block& block = blocks_[static_cast<std::size_t>(id)];
        // A twin computed at the same time keeps the entry; this copy stays
        // private and is freed, not cached, when its sequence ends.
        if (block.hashed || find_cached(hash, block_tokens)) {
            continue;
        }
        block.hashed = true;
        block.hash = hash;
        block.parent = parent;
        block.tokens.assign(block_tokens.begin(), block_tokens.end());
        by_hash_.emplace(hash, id);
        by_parent_.emplace(child_key(parent, block.tokens.front()), id);
        events::emit_now(
            sink_, events::BlockCached{.block = id,
                                       .request = request,
                                       .hash = hash,
                                       .first_token = static_cast<std::int64_t>(b) * block_size_});
    }
}

void KvManager::unreference(std::int64_t request, BlockId block, std::vector<BlockId>& released) {
    Block& b = blocks_[static_cast<std::size_t>(block)];
    if (b.ref <= 0) {
        throw std::logic_error("KV manager: block " + std::to_string(block) +
                               " released more often than referenced");
    }
    if (--b.ref > 0) {
        events::emit_now(sink_, events::BlockUnshared{
                                    .block = block, .request = request, .references_left = b.ref});
        return;
    }
    released.push_back(block);
    if (b.hashed) {
        lru_.push_back(block);
        b.lru_position = std::prev(lru_.end());
        b.in_lru = true;
    } else {
        free_.push_back(block);
        b.in_free = true;
    }
    events::emit_now(
        sink_, events::BlockFreed{.block = block, .request = request, .stays_cached = b.hashed});
}

std::vector<BlockId> KvManager::release(std::int64_t request, SequenceBlocks& sequence) {
    std::vector<BlockId> released;
    for (auto it = sequence.block_table.rbegin(); it != sequence.block_table.rend(); ++it) {
        unreference(request, *it, released);
    }
    sequence = SequenceBlocks{};
    return released;
}

std::optional<std::vector<BlockId>>
KvManager::make_private(std::int64_t request, SequenceBlocks& sequence, int first, int last) {
    last = std::min(last, static_cast<int>(sequence.block_table.size()));
    int shared = 0;
    for (int i = first; i < last; ++i) {
        shared += ref_count(sequence.block_table[static_cast<std::size_t>(i)]) > 1 ? 1 : 0;
    }
    if (shared > available_blocks()) {
        return std::nullopt;
    }
    std::vector<BlockId> replaced;
    for (int i = first; i < last; ++i) {
        BlockId& slot = sequence.block_table[static_cast<std::size_t>(i)];
        Block& b = blocks_[static_cast<std::size_t>(slot)];
        if (b.ref > 1) {
            replaced.push_back(slot);
            slot = *take_block(request);
        } else if (b.hashed) {
            forget_hash(slot); // its content is about to change
            events::emit_now(sink_, events::BlockEvicted{.block = slot, .request = request});
        }
    }
    sequence.block_hashes.clear();
    sequence.cacheable = false;
    return replaced;
}

std::vector<BlockId> KvManager::drop(std::int64_t request, std::span<const BlockId> blocks) {
    std::vector<BlockId> released;
    for (const BlockId block : blocks) {
        unreference(request, block, released);
    }
    return released;
}

std::vector<BlockId> KvManager::truncate(std::int64_t request, SequenceBlocks& sequence,
                                         int blocks) {
    std::vector<BlockId> released;
    while (static_cast<int>(sequence.block_table.size()) > blocks) {
        unreference(request, sequence.block_table.back(), released);
        sequence.block_table.pop_back();
    }
    return released;
}

std::string KvManager::check(std::span<const SequenceBlocks* const> sequences) const {
    std::vector<int> references(blocks_.size(), 0);
    for (const SequenceBlocks* sequence : sequences) {
        for (const BlockId block : sequence->block_table) {
            if (block < 0 || block >= total_blocks()) {
                return "a block table holds block " + std::to_string(block) + ", outside the pool";
            }
            ++references[static_cast<std::size_t>(block)];
        }
        if (sequence->length > sequence->capacity(block_size_)) {
            return "a sequence holds " + std::to_string(sequence->length) + " tokens in " +
                   std::to_string(sequence->block_table.size()) + " blocks";
        }
    }
    std::size_t in_free = 0;
    std::size_t in_lru = 0;
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
        const Block& b = blocks_[i];
        const std::string name = "block " + std::to_string(i);
        if (b.ref != references[i]) {
            return name + " has ref count " + std::to_string(b.ref) + " but " +
                   std::to_string(references[i]) + " references";
        }
        if ((b.in_free || b.in_lru) && b.ref != 0) {
            return name + " is referenced and also free or cached";
        }
        if (b.in_free && b.in_lru) {
            return name + " is both free and cached";
        }
        if (b.ref == 0 && !b.in_free && !b.in_lru) {
            return name + " is unreferenced but neither free nor cached (leaked)";
        }
        if (b.in_lru && !b.hashed) {
            return name + " is in the cache queue without a hash";
        }
        if (b.in_free && b.hashed) {
            return name + " is free but still registered in the prefix cache";
        }
        in_free += b.in_free ? 1 : 0;
        in_lru += b.in_lru ? 1 : 0;
    }
    if (in_free != free_.size() || in_lru != lru_.size()) {
        return "the free or cache queue disagrees with the blocks' states";
    }
    std::size_t hashed = 0;
    for (const Block& b : blocks_) {
        hashed += b.hashed ? 1 : 0;
    }
    if (hashed != by_hash_.size() || hashed != by_parent_.size()) {
        return "the hash table holds " + std::to_string(by_hash_.size()) + " entries for " +
               std::to_string(hashed) + " hashed blocks";
    }
    for (const auto& [hash, block] : by_hash_) {
        const Block& b = blocks_[static_cast<std::size_t>(block)];
        if (!b.hashed || b.hash != hash) {
            return "the hash table points at block " + std::to_string(block) +
                   ", which does not hold that hash";
        }
    }
    return {};
}

} // namespace kvscope::kv
