// Which cached block the KV manager reclaims when an allocation finds no free
// one. Cached blocks hold a finished request's prefix, unreferenced, kept
// for later hits; the policy decides whose prefix goes first.
//   lru  least recently released first (vLLM's and SGLang's choice)
//   lfu  fewest uses first (one for its computation, one per prefix-cache
//        hit), ties least recently released: shared system prompts outlive
//        one-off conversations however long ago they were last used
// Both reclaim a prefix chain from its tail: the KV manager releases a table
// last block first, and every hit on a block also hits the blocks before it,
// so a block rarely has more uses than its parent (only when the parent was
// reclaimed and computed again, or the child hangs off a twin).
#pragma once

#include "engine/kv/block_queue.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

namespace kvscope::kv {

enum class CachePolicy { lru, lfu };

std::string_view cache_policy_name(CachePolicy policy);
std::optional<CachePolicy> parse_cache_policy(std::string_view name);

// The cached blocks in the order the policy reclaims them.
class ReclaimOrder {
public:
    ReclaimOrder(CachePolicy policy, int num_blocks);

    CachePolicy policy() const { return policy_; }
    bool empty() const { return size() == 0; }
    std::size_t size() const;
    bool contains(BlockId block) const;

    // The block became cached, after `uses` uses in its life so far.
    void push(BlockId block, std::int64_t uses);
    // The block leaves the queue (a prefix-cache hit references it again).
    void erase(BlockId block);
    // Takes the block to reclaim; the queue must not be empty.
    BlockId pop();

private:
    struct LfuKey {
        std::int64_t uses = 0;
        std::uint64_t released = 0; // tie-break: the earlier release goes first
        BlockId block = 0;
        auto operator<=>(const LfuKey&) const = default;
    };

    CachePolicy policy_;
    BlockQueue lru_;
    std::set<LfuKey> lfu_;
    std::vector<LfuKey> lfu_keys_; // by block, to find a block's entry
    std::vector<char> in_lfu_;
    std::uint64_t releases_ = 0;
};

} // namespace kvscope::kv
