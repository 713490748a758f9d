#include "engine/kv/kv_manager.h"

#include "engine/events/typed_events.h"

#include <algorithm>
#include <stdexcept>

namespace kvscope::kv {

KvManager::KvManager(int num_blocks, int block_size, bool prefix_caching, CachePolicy policy,
                     std::vector<std::int32_t> group_windows)
    : block_size_(block_size)
    , prefix_caching_(prefix_caching)
    , windows_(std::move(group_windows))
    , used_by_group_(windows_.size(), 0)
    , cached_by_group_(windows_.size(), 0)
    , blocks_(static_cast<std::size_t>(std::max(0, num_blocks)))
    , free_(std::max(0, num_blocks))
    , cached_(policy, std::max(0, num_blocks)) {
    if (num_blocks <= 0 || block_size <= 0) {
        throw std::invalid_argument("the KV cache needs a positive block count and block size");
    }
    if (windows_.empty() || std::any_of(windows_.begin(), windows_.end(),
                                        [](std::int32_t window) { return window < 0; })) {
        throw std::invalid_argument("the KV cache needs at least one group, with windows >= 0");
    }
    block_tokens_.resize(static_cast<std::size_t>(num_blocks) *
                         static_cast<std::size_t>(block_size));
    for (BlockId b = 0; b < num_blocks; ++b) {
        free_.push_back(b);
    }
}

KvManagerStats KvManager::stats() const {
    KvManagerStats s;
    s.total = total_blocks();
    s.free = static_cast<int>(free_.size());
    s.cached = static_cast<int>(cached_.size());
    s.used = s.total - s.free - s.cached;
    s.used_by_group = used_by_group_;
    s.cached_by_group = cached_by_group_;
    return s;
}

void KvManager::count_block(BlockId block, int used, int cached) {
    const auto group = static_cast<std::size_t>(blocks_[static_cast<std::size_t>(block)].group);
    used_by_group_[group] += used;
    cached_by_group_[group] += cached;
}

std::optional<BlockId> KvManager::find_cached(BlockHash hash, std::span<const std::int32_t> tokens,
                                              int group) const {
    const auto it = by_hash_.find(group_hash(hash, group));
    if (it == by_hash_.end() || blocks_[static_cast<std::size_t>(it->second)].group != group) {
        return std::nullopt;
    }
    const auto cached = tokens_of(it->second);
    if (!std::equal(cached.begin(), cached.end(), tokens.begin(), tokens.end())) {
        return std::nullopt; // a collision: another prefix under the same hash
    }
    return it->second;
}

std::vector<BlockHash> KvManager::tier_hashes() const {
    std::vector<BlockHash> hashes;
    hashes.reserve(tier_.size());
    for (const auto& [hash, entry] : tier_) {
        hashes.push_back(hash);
    }
    return hashes;
}

bool KvManager::in_tier(BlockHash hash, std::span<const std::int32_t> tokens) const {
    const auto it = tier_.find(hash);
    return it != tier_.end() && std::equal(it->second.tokens.begin(), it->second.tokens.end(),
                                           tokens.begin(), tokens.end());
}

PrefixMatch KvManager::match_prefix(std::span<const std::int32_t> tokens,
                                    std::uint64_t extra_key) const {
    std::vector<BlockHash> hashes;
    if (hybrid()) {
        return find_group_prefix(tokens, extra_key, nullptr, hashes);
    }
    return find_prefix(tokens, extra_key, nullptr, hashes);
}

std::int64_t KvManager::peak_blocks(std::int64_t tokens, std::int32_t step_tokens) const {
    const std::int64_t blocks = (tokens + block_size_ - 1) / block_size_;
    std::int64_t peak = 0;
    for (const std::int32_t w : windows_) {
        // A step from position L computing c tokens holds a sliding group's
        // blocks from the one holding L - w + 1 to the one holding L + c - 1:
        // at most ceil((w - 1 + c) / block size) + 1, wherever L falls.
        const std::int64_t in_window =
            (std::int64_t{w} - 1 + std::max<std::int64_t>(1, step_tokens) + block_size_ - 1) /
                block_size_ +
            1;
        // One group is a plain cache, whose blocks stay (no window release).
        peak += hybrid() && w > 0 ? std::min(blocks, in_window) : blocks;
    }
    return peak;
}

std::int64_t KvManager::tokens_per_sequence(std::int32_t step_tokens) const {
    constexpr std::int64_t kUnbounded = std::numeric_limits<std::int32_t>::max();
    const std::int64_t total = total_blocks();
    // The largest whole number of blocks whose peak fits (the peak grows
    // with the length); sliding groups alone may fit any length.
    std::int64_t lo = 0;
    std::int64_t hi = kUnbounded / block_size_;
    if (peak_blocks(hi * block_size_, step_tokens) <= total) {
        return kUnbounded;
    }
    while (lo + 1 < hi) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        (peak_blocks(mid * block_size_, step_tokens) <= total ? lo : hi) = mid;
    }
    return lo * block_size_;
}

int KvManager::first_block_in_window(int group, std::int32_t position) const {
    const std::int32_t w = window(group);
    // A query at `position` attends positions from position - w + 1 on.
    return w > 0 ? std::max(0, position - w + 1) / block_size_ : 0;
}

PrefixMatch KvManager::find_group_prefix(std::span<const std::int32_t> tokens,
                                         std::uint64_t extra_key,
                                         std::vector<std::vector<BlockId>>* hits,
                                         std::vector<BlockHash>& hashes) const {
    PrefixMatch match;
    const auto total_blocks = static_cast<std::int32_t>(
        (static_cast<std::int64_t>(tokens.size()) + block_size_ - 1) / block_size_);
    match.blocks_missed = total_blocks;
    if (hits != nullptr) {
        hits->assign(windows_.size(), {}); // no hit in any group unless found below
    }
    if (!prefix_caching_ || tokens.empty()) {
        return match;
    }
    // Each block's chain hash and, per group, its cached copy (kNoBlock:
    // none), as far as every whole-context group has the blocks.
    const auto hittable = static_cast<std::int32_t>((tokens.size() - 1) / block_size_);
    std::vector<std::vector<BlockId>> found(windows_.size());
    std::vector<BlockHash> chain;
    BlockHash parent = kRootBlockHash;
    for (std::int32_t b = 0; b < hittable; ++b) {
        const auto block_tokens = tokens.subspan(static_cast<std::size_t>(b) * block_size_,
                                                 static_cast<std::size_t>(block_size_));
        const BlockHash hash = hash_block(parent, block_tokens, extra_key);
        bool complete = true;
        for (int g = 0; g < groups(); ++g) {
            const std::optional<BlockId> block = find_cached(hash, block_tokens, g);
            found[static_cast<std::size_t>(g)].push_back(block.value_or(kNoBlock));
            complete = complete && (block.has_value() || window(g) > 0);
        }
        if (!complete) {
            for (auto& blocks : found) {
                blocks.pop_back();
            }
            break;
        }
        chain.push_back(hash);
        parent = hash;
    }
    // The longest hit every sliding group can serve: the blocks of its
    // window before the first token computed, all cached.
    auto hit = static_cast<std::int32_t>(chain.size());
    const auto serves = [&](std::int32_t blocks) {
        for (int g = 0; g < groups(); ++g) {
            const auto& cached = found[static_cast<std::size_t>(g)];
            for (int b = first_block_in_window(g, blocks * block_size_); b < blocks; ++b) {
                if (cached[static_cast<std::size_t>(b)] == kNoBlock) {
                    return false;
                }
            }
        }
        return true;
    };
    while (hit > 0 && !serves(hit)) {
        --hit;
    }
    match.blocks_hit = hit;
    match.hit_tokens = hit * block_size_;
    match.blocks_missed = total_blocks - hit;
    // Tokens past the hit that a cached block of group 0 shares, too few
    // for a block (or cut short by a group that could not serve more).
    match.shared_short_tokens =
        shared_short_tokens(hit == 0 ? kRootBlockHash : chain[static_cast<std::size_t>(hit) - 1],
                            tokens.subspan(static_cast<std::size_t>(match.hit_tokens)), extra_key);
    hashes.insert(hashes.end(), chain.begin(), chain.begin() + hit);
    if (hits != nullptr) {
        hits->assign(windows_.size(), {});
        for (int g = 0; g < groups(); ++g) {
            const int first = first_block_in_window(g, hit * block_size_);
            auto& table = (*hits)[static_cast<std::size_t>(g)];
            table.assign(static_cast<std::size_t>(hit), kNoBlock);
            for (int b = first; b < hit; ++b) {
                table[static_cast<std::size_t>(b)] =
                    found[static_cast<std::size_t>(g)][static_cast<std::size_t>(b)];
            }
        }
    }
    return match;
}

PrefixMatch KvManager::find_prefix(std::span<const std::int32_t> tokens, std::uint64_t extra_key,
                                   std::vector<BlockId>* hits,
                                   std::vector<BlockHash>& hashes) const {
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
        // The pool first, then the second tier (loaded back on admission).
        BlockId found = kTierHit;
        if (const std::optional<BlockId> block = find_cached(hash, block_tokens)) {
            found = *block;
        } else if (tier_mover_ != nullptr && in_tier(hash, block_tokens)) {
            ++match.tier_blocks_hit;
        } else {
            break;
        }
        if (hits) {
            hits->push_back(found);
        }
        hashes.push_back(hash);
        parent = hash;
    }
    match.blocks_hit = b;
    match.hit_tokens = b * block_size_;
    match.blocks_missed = total_blocks - b;
    match.shared_short_tokens = shared_short_tokens(
        parent, tokens.subspan(static_cast<std::size_t>(match.hit_tokens)), extra_key);
    return match;
}

std::int32_t KvManager::shared_short_tokens(BlockHash parent, std::span<const std::int32_t> rest,
                                            std::uint64_t extra_key) const {
    if (rest.empty()) {
        return 0;
    }
    // Only children that begin with the next token can agree with it at all.
    const auto head = by_parent_.find(child_key(parent, rest.front()));
    std::int32_t longest = 0;
    for (BlockId child = head == by_parent_.end() ? BlockQueue::kNone : head->second;
         child != BlockQueue::kNone;
         child = blocks_[static_cast<std::size_t>(child)].next_sibling) {
        const Block& block = blocks_[static_cast<std::size_t>(child)];
        const auto child_tokens = tokens_of(child);
        // Another extra key, another parent under the same key, or another
        // group's copy (cached under a mix of the hash): not group 0's child.
        if (block.parent != parent || hash_block(parent, child_tokens, extra_key) != block.hash) {
            continue;
        }
        const auto n = std::min(child_tokens.size(), rest.size());
        const auto mismatch = std::mismatch(
            rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n), child_tokens.begin());
        longest = std::max(longest, static_cast<std::int32_t>(mismatch.first - rest.begin()));
    }
    return longest;
}

std::optional<BlockId> KvManager::take_block(std::int64_t request, int group) {
    BlockId block;
    if (!free_.empty()) {
        block = free_.pop_front();
    } else if (!cached_.empty()) {
        block = cached_.pop();
        offload(request, block); // write on eviction: the tier keeps what the pool lets go
        forget_hash(block);
        count_block(block, 0, -1);
        events::emit_now(
            sink_, events::BlockEvicted{.block = block,
                                        .request = request,
                                        .group = blocks_[static_cast<std::size_t>(block)].group});
    } else {
        return std::nullopt;
    }
    Block& taken = blocks_[static_cast<std::size_t>(block)];
    taken.ref = 1;
    taken.uses = 1;
    taken.group = group;
    count_block(block, 1, 0);
    events::emit_now(sink_,
                     events::BlockAllocated{.block = block, .request = request, .group = group});
    return block;
}

void KvManager::offload(std::int64_t request, BlockId block) {
    const Block& b = blocks_[static_cast<std::size_t>(block)];
    if (tier_mover_ == nullptr || !b.hashed || tier_.contains(b.hash)) {
        return;
    }
    const BlockHash hash = b.hash;
    const auto tokens = tokens_of(block);
    TierEntry entry{std::vector<std::int32_t>(tokens.begin(), tokens.end())};
    if (!tier_mover_->offload(request, block, hash)) {
        return; // the tier could not take it: the block is simply lost, as without a tier
    }
    tier_.insert_or_assign(hash, std::move(entry));
}

void KvManager::register_hash(BlockId block, BlockHash hash, BlockHash parent,
                              std::span<const std::int32_t> tokens) {
    Block& b = blocks_[static_cast<std::size_t>(block)];
    b.hashed = true;
    b.hash = hash;
    b.parent = parent;
    std::copy(tokens.begin(), tokens.end(),
              block_tokens_.begin() + static_cast<std::ptrdiff_t>(block) * block_size_);
    by_hash_.emplace(hash, block);
    const auto [head, inserted] = by_parent_.try_emplace(child_key(parent, tokens.front()), block);
    b.prev_sibling = BlockQueue::kNone;
    b.next_sibling = inserted ? BlockQueue::kNone : head->second;
    if (!inserted) {
        blocks_[static_cast<std::size_t>(head->second)].prev_sibling = block;
        head->second = block;
    }
}

void KvManager::forget_hash(BlockId block) {
    Block& b = blocks_[static_cast<std::size_t>(block)];
    if (!b.hashed) {
        return;
    }
    // A hashed block owns its hash's entry (register_hash() only runs for a
    // hash not yet there); checked all the same, so a wrong call cannot drop
    // another block's entry.
    if (const auto it = by_hash_.find(b.hash); it != by_hash_.end() && it->second == block) {
        by_hash_.erase(it);
    }
    const BlockId prev = b.prev_sibling;
    const BlockId next = b.next_sibling;
    if (next != BlockQueue::kNone) {
        blocks_[static_cast<std::size_t>(next)].prev_sibling = prev;
    }
    if (prev != BlockQueue::kNone) {
        blocks_[static_cast<std::size_t>(prev)].next_sibling = next;
    } else {
        const BlockHash key = child_key(b.parent, tokens_of(block).front());
        if (next == BlockQueue::kNone) {
            by_parent_.erase(key);
        } else {
            by_parent_[key] = next;
        }
    }
    b.prev_sibling = BlockQueue::kNone;
    b.next_sibling = BlockQueue::kNone;
    b.hashed = false;
}

void KvManager::pin(BlockId block) {
    if (cached_.contains(block)) {
        cached_.erase(block);
        count_block(block, 1, -1);
    }
    ++blocks_[static_cast<std::size_t>(block)].ref;
}

void KvManager::unpin(BlockId block) {
    Block& b = blocks_[static_cast<std::size_t>(block)];
    if (--b.ref == 0) {
        cached_.push(block, b.uses); // a pinned hit is a hashed block
        count_block(block, -1, 1);
    }
}

void KvManager::take_pinned(std::int64_t request, BlockId block) {
    events::emit_now(sink_,
                     events::BlockShared{.block = block,
                                         .request = request,
                                         .group = blocks_[static_cast<std::size_t>(block)].group});
}

int KvManager::blocks_needed(const SequenceBlocks& sequence, std::int32_t new_length) const {
    const auto needed =
        static_cast<int>((static_cast<std::int64_t>(new_length) + block_size_ - 1) / block_size_);
    return std::max(0, needed - static_cast<int>(sequence.block_table.size())) * groups();
}

std::optional<PrefixMatch> KvManager::admit(std::int64_t request, SequenceBlocks& sequence,
                                            std::span<const std::int32_t> tokens,
                                            std::uint64_t extra_key, std::int32_t first_step_tokens,
                                            std::int32_t step_tokens) {
    if (!sequence.block_table.empty()) {
        throw std::logic_error("admit() needs an empty sequence");
    }
    if (hybrid()) {
        return admit_groups(request, sequence, tokens, extra_key, first_step_tokens, step_tokens);
    }
    std::vector<BlockId> hits;
    const PrefixMatch match = find_prefix(tokens, extra_key, &hits, sequence.block_hashes);
    // Hit blocks sitting in the reclaim order are not available for the rest.
    int hit_cached = 0;
    for (const BlockId block : hits) {
        hit_cached += block != kTierHit && cached_.contains(block) ? 1 : 0;
    }
    // Tier hits need fresh blocks too.
    if (match.blocks_missed + match.tier_blocks_hit > available_blocks() - hit_cached) {
        sequence.block_hashes.clear();
        return std::nullopt;
    }
    PrefixMatch result = match;
    const std::vector<BlockHash> hashes = sequence.block_hashes;
    // The pool's hits are pinned first, so no allocation below can reclaim
    // one of them; they are taken (and said so) in table order below, the
    // order the block map rebuilds a request's table in.
    for (const BlockId block : hits) {
        if (block != kTierHit) {
            pin(block);
        }
    }
    // The tier's hits become its most recently used, so the blocks the
    // allocations below offload push others out of a full tier, not these.
    for (std::size_t i = 0; i < hits.size(); ++i) {
        if (hits[i] == kTierHit) {
            tier_mover_->touch(hashes[i]);
        }
    }
    std::vector<BlockId> table;
    std::size_t kept = hits.size();
    for (std::size_t i = 0; i < hits.size(); ++i) {
        if (hits[i] != kTierHit) {
            take_pinned(request, hits[i]);
            table.push_back(hits[i]);
            continue;
        }
        // Loaded back into a fresh block and cached in the pool again, like
        // a block this request computed.
        const BlockId fresh = *take_block(request);
        table.push_back(fresh);
        const BlockHash parent = i == 0 ? kRootBlockHash : hashes[i - 1];
        const auto block_tokens = tokens.subspan(i * static_cast<std::size_t>(block_size_),
                                                 static_cast<std::size_t>(block_size_));
        if (!by_hash_.contains(hashes[i]) && tier_mover_->reload(request, fresh, hashes[i])) {
            register_hash(fresh, hashes[i], parent, block_tokens);
            events::emit_now(sink_, events::BlockCached{
                                        .block = fresh,
                                        .request = request,
                                        .hash = hashes[i],
                                        .first_token = static_cast<std::int64_t>(i) * block_size_});
            continue;
        }
        // Lost meanwhile (this admission offloaded more blocks than the tier
        // holds besides its hits), its copy failed, or a twin is in the pool
        // now: from here on the prompt is computed.
        kept = i;
        table.pop_back();
        std::vector<BlockId> released;
        unreference(request, fresh, released);
        for (std::size_t j = i + 1; j < hits.size(); ++j) {
            if (hits[j] != kTierHit) {
                unpin(hits[j]);
            }
        }
        break;
    }
    if (kept < hits.size()) {
        const auto hit = static_cast<std::int32_t>(kept);
        result.tier_blocks_hit = static_cast<std::int32_t>(
            std::count(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(kept), kTierHit));
        result.blocks_missed += result.blocks_hit - hit;
        result.blocks_hit = hit;
        result.hit_tokens = hit * block_size_;
        // What the lookup saw past the lost block no longer follows the hit.
        result.shared_short_tokens = 0;
        sequence.block_hashes.resize(kept);
    }
    sequence.block_table = std::move(table);
    sequence.length = result.hit_tokens;
    if (!grow(request, sequence, static_cast<std::int32_t>(tokens.size()))) {
        if (kept == hits.size()) {
            throw std::logic_error("KV manager: blocks counted free were not");
        }
        // Cut short, the prompt needs blocks for hits past the cut that other
        // requests hold, and the pool may not have them: the request waits.
        // The blocks loaded so far stay cached in the pool for its next try.
        release(request, sequence);
        return std::nullopt;
    }
    // Only an admission that stuck counts toward its pool hits' uses (LFU).
    for (std::size_t i = 0; i < kept; ++i) {
        if (hits[i] != kTierHit) {
            ++blocks_[static_cast<std::size_t>(hits[i])].uses;
        }
    }
    return result;
}

std::optional<PrefixMatch> KvManager::admit_groups(std::int64_t request, SequenceBlocks& sequence,
                                                   std::span<const std::int32_t> tokens,
                                                   std::uint64_t extra_key,
                                                   std::int32_t first_step_tokens,
                                                   std::int32_t step_tokens) {
    std::vector<std::vector<BlockId>> hits;
    std::vector<BlockHash> hashes;
    const PrefixMatch match = find_group_prefix(tokens, extra_key, &hits, hashes);
    // Blocks the first step needs in every group, less the hits; hit
    // blocks sitting in the reclaim order are not available for the rest.
    const auto first_step_end = static_cast<std::int32_t>(
        std::min<std::int64_t>(static_cast<std::int64_t>(tokens.size()),
                               std::int64_t{match.hit_tokens} + std::max(1, first_step_tokens)));
    const int step_blocks = (first_step_end + block_size_ - 1) / block_size_;
    const int needed = std::max(0, step_blocks - match.blocks_hit) * groups();
    int hit_cached = 0;
    int hit_held = 0;
    for (const auto& table : hits) {
        for (const BlockId block : table) {
            hit_cached += block != kNoBlock && cached_.contains(block) ? 1 : 0;
            hit_held += block != kNoBlock ? 1 : 0;
        }
    }
    // Admitted only when the pool could also hold the prompt at its busiest
    // step, as a plain cache's whole-prompt reservation is: taking a long
    // prompt on its first chunk alone would preempt it (or others) a few
    // steps later, again and again in a tight pool.
    const std::int64_t prompt_peak =
        peak_blocks(
            static_cast<std::int64_t>(tokens.size()),
            std::max(first_step_tokens, step_tokens == 0 ? first_step_tokens : step_tokens)) -
        hit_held;
    if (std::max<std::int64_t>(needed, prompt_peak) > available_blocks() - hit_cached) {
        return std::nullopt;
    }
    for (const auto& table : hits) {
        for (const BlockId block : table) {
            if (block != kNoBlock) {
                pin(block);
            }
        }
    }
    sequence.other_tables.assign(windows_.size() - 1, {});
    for (int g = 0; g < groups(); ++g) {
        std::vector<BlockId>& table = sequence.table(g);
        table = std::move(hits[static_cast<std::size_t>(g)]);
        for (const BlockId block : table) {
            if (block != kNoBlock) {
                take_pinned(request, block);
                ++blocks_[static_cast<std::size_t>(block)].uses;
            }
        }
    }
    sequence.block_hashes = std::move(hashes);
    sequence.length = match.hit_tokens;
    if (!grow(request, sequence, first_step_end)) {
        throw std::logic_error("KV manager: blocks counted free were not");
    }
    return match;
}

bool KvManager::grow(std::int64_t request, SequenceBlocks& sequence, std::int32_t new_length) {
    const int needed = blocks_needed(sequence, new_length);
    if (needed > available_blocks()) {
        return false;
    }
    if (sequence.groups() != groups()) {
        sequence.other_tables.resize(windows_.size() - 1);
    }
    for (int i = 0; i < needed / groups(); ++i) {
        for (int g = 0; g < groups(); ++g) {
            sequence.table(g).push_back(*take_block(request, g));
        }
    }
    return true;
}

std::vector<BlockId> KvManager::release_outside_window(std::int64_t request,
                                                       SequenceBlocks& sequence) {
    std::vector<BlockId> released;
    for (int g = 0; g < sequence.groups() && g < groups(); ++g) {
        if (window(g) == 0) {
            continue;
        }
        std::vector<BlockId>& table = sequence.table(g);
        const auto first = std::min(
            table.size(), static_cast<std::size_t>(first_block_in_window(g, sequence.length)));
        for (std::size_t b = 0; b < first; ++b) {
            if (table[b] != kNoBlock) {
                unreference(request, table[b], released, true);
                table[b] = kNoBlock;
            }
        }
    }
    return released;
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
        for (int g = 0; g < sequence.groups(); ++g) {
            const BlockId id = sequence.table(g)[b];
            if (id == kNoBlock) {
                continue; // the window left it before it was full (a window under a block)
            }
            Block& block = blocks_[static_cast<std::size_t>(id)];
            const BlockHash key = group_hash(hash, g);
            // A twin computed at the same time keeps the entry (as does another
            // prefix with the same hash); this copy stays private and is freed,
            // not cached, when its sequence ends.
            if (block.hashed || by_hash_.contains(key)) {
                continue;
            }
            register_hash(id, key, parent, block_tokens);
            events::emit_now(sink_, events::BlockCached{
                                        .block = id,
                                        .request = request,
                                        .hash = hash,
                                        .first_token = static_cast<std::int64_t>(b) * block_size_,
                                        .group = g});
            if (write_through_) {
                offload(request, id); // the tier gets it now, while it is still needed here
            }
        }
    }
}

void KvManager::unreference(std::int64_t request, BlockId block, std::vector<BlockId>& released,
                            bool left_window) {
    Block& b = blocks_[static_cast<std::size_t>(block)];
    if (b.ref <= 0) {
        throw std::logic_error("KV manager: block " + std::to_string(block) +
                               " released more often than referenced");
    }
    if (--b.ref > 0) {
        events::emit_now(sink_, events::BlockUnshared{.block = block,
                                                      .request = request,
                                                      .references_left = b.ref,
                                                      .group = b.group,
                                                      .left_window = left_window});
        return;
    }
    released.push_back(block);
    count_block(block, -1, b.hashed ? 1 : 0);
    if (b.hashed) {
        cached_.push(block, b.uses);
    } else {
        free_.push_back(block);
    }
    events::emit_now(sink_, events::BlockFreed{.block = block,
                                               .request = request,
                                               .stays_cached = b.hashed,
                                               .group = b.group,
                                               .left_window = left_window});
}

std::vector<BlockId> KvManager::release(std::int64_t request, SequenceBlocks& sequence) {
    std::vector<BlockId> released;
    // Last block first (in every group), so a sequence's tail is the first
    // of its blocks to be reclaimed.
    for (auto b = static_cast<std::ptrdiff_t>(sequence.block_table.size()) - 1; b >= 0; --b) {
        for (int g = 0; g < sequence.groups(); ++g) {
            const BlockId block = sequence.table(g)[static_cast<std::size_t>(b)];
            if (block != kNoBlock) {
                unreference(request, block, released);
            }
        }
    }
    sequence = SequenceBlocks{};
    return released;
}

std::optional<std::vector<BlockId>>
KvManager::make_private(std::int64_t request, SequenceBlocks& sequence, int first, int last) {
    if (sequence.groups() > 1) {
        throw std::logic_error("token eviction rewrites one block table, not a hybrid cache's");
    }
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
        for (int g = 0; g < sequence.groups(); ++g) {
            std::vector<BlockId>& table = sequence.table(g);
            if (table.back() != kNoBlock) {
                unreference(request, table.back(), released);
            }
            table.pop_back();
        }
    }
    return released;
}

std::string KvManager::check(std::span<const SequenceBlocks* const> sequences) const {
    std::vector<int> references(blocks_.size(), 0);
    for (const SequenceBlocks* sequence : sequences) {
        if (!sequence->block_table.empty() && sequence->groups() != groups()) {
            return "a sequence has " + std::to_string(sequence->groups()) + " block tables for " +
                   std::to_string(groups()) + " KV groups";
        }
        for (int g = 0; g < sequence->groups(); ++g) {
            const std::vector<BlockId>& table = sequence->table(g);
            if (table.size() != sequence->block_table.size()) {
                return "group " + std::to_string(g) + "'s block table holds " +
                       std::to_string(table.size()) + " entries, group 0's " +
                       std::to_string(sequence->block_table.size());
            }
            // A query at the next position attends from this block on.
            const int first_needed = first_block_in_window(g, sequence->length);
            for (std::size_t b = 0; b < table.size(); ++b) {
                const BlockId block = table[b];
                if (block == kNoBlock) {
                    if (window(g) == 0 || static_cast<int>(b) >= first_needed) {
                        return "group " + std::to_string(g) + " has no block at entry " +
                               std::to_string(b) + ", which its attention still reads";
                    }
                    continue;
                }
                if (block < 0 || block >= total_blocks()) {
                    return "a block table holds block " + std::to_string(block) +
                           ", outside the pool";
                }
                if (static_cast<int>(b) < first_needed) {
                    return "group " + std::to_string(g) + " holds block " + std::to_string(block) +
                           " at entry " + std::to_string(b) + ", outside its window of " +
                           std::to_string(window(g));
                }
                if (blocks_[static_cast<std::size_t>(block)].group != g) {
                    return "group " + std::to_string(g) + "'s table holds block " +
                           std::to_string(block) + " of group " +
                           std::to_string(blocks_[static_cast<std::size_t>(block)].group);
                }
                ++references[static_cast<std::size_t>(block)];
            }
        }
        if (sequence->length > sequence->capacity(block_size_)) {
            return "a sequence holds " + std::to_string(sequence->length) + " tokens in " +
                   std::to_string(sequence->block_table.size()) + " blocks";
        }
    }
    std::size_t hashed = 0;
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
        const Block& b = blocks_[i];
        const auto id = static_cast<BlockId>(i);
        const bool in_free = free_.contains(id);
        const bool in_cache = cached_.contains(id);
        const std::string name = "block " + std::to_string(i);
        if (b.ref != references[i]) {
            return name + " has ref count " + std::to_string(b.ref) + " but " +
                   std::to_string(references[i]) + " references";
        }
        if ((in_free || in_cache) && b.ref != 0) {
            return name + " is referenced and also free or cached";
        }
        if (in_free && in_cache) {
            return name + " is both free and cached";
        }
        if (b.ref == 0 && !in_free && !in_cache) {
            return name + " is unreferenced but neither free nor cached (leaked)";
        }
        if (in_cache && !b.hashed) {
            return name + " is in the cache queue without a hash";
        }
        if (in_free && b.hashed) {
            return name + " is free but still registered in the prefix cache";
        }
        if (b.hashed) {
            ++hashed;
            const auto it = by_hash_.find(b.hash);
            if (it == by_hash_.end() || it->second != id) {
                return name + " holds a hash the hash table does not give it for";
            }
        }
    }
    std::vector<int> used(windows_.size(), 0);
    std::vector<int> cached(windows_.size(), 0);
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
        const auto g = static_cast<std::size_t>(blocks_[i].group);
        used[g] += blocks_[i].ref > 0 ? 1 : 0;
        cached[g] += cached_.contains(static_cast<BlockId>(i)) ? 1 : 0;
    }
    if (used != used_by_group_ || cached != cached_by_group_) {
        return "the per-group tallies of used and cached blocks are off";
    }
    if (hashed != by_hash_.size()) {
        return "the hash table holds " + std::to_string(by_hash_.size()) + " entries for " +
               std::to_string(hashed) + " hashed blocks";
    }
    // Every sibling list: its blocks hashed, under the list's key, linked
    // both ways; together exactly the hashed blocks.
    std::size_t siblings = 0;
    for (const auto& [key, head] : by_parent_) {
        BlockId prev = BlockQueue::kNone;
        for (BlockId child = head; child != BlockQueue::kNone;
             child = blocks_[static_cast<std::size_t>(child)].next_sibling) {
            const Block& b = blocks_[static_cast<std::size_t>(child)];
            if (!b.hashed || child_key(b.parent, tokens_of(child).front()) != key ||
                b.prev_sibling != prev || ++siblings > hashed) {
                return "the index by parent holds block " + std::to_string(child) +
                       " wrongly (unhashed, under another key, or mislinked)";
            }
            prev = child;
        }
    }
    if (siblings != hashed) {
        return "the index by parent holds " + std::to_string(siblings) + " blocks for " +
               std::to_string(hashed) + " hashed blocks";
    }
    return {};
}

} // namespace kvscope::kv
