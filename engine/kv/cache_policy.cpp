#include "engine/kv/cache_policy.h"

#include <stdexcept>
#include <string>

namespace kvscope::kv {

std::string_view cache_policy_name(CachePolicy policy) {
    switch (policy) {
    case CachePolicy::lru:
        return "lru";
    case CachePolicy::lfu:
        return "lfu";
    }
    return "lru";
}

std::optional<CachePolicy> parse_cache_policy(std::string_view name) {
    for (const CachePolicy policy : {CachePolicy::lru, CachePolicy::lfu}) {
        if (name == cache_policy_name(policy)) {
            return policy;
        }
    }
    return std::nullopt;
}

ReclaimOrder::ReclaimOrder(CachePolicy policy, int num_blocks)
    : policy_(policy)
    , lru_(policy == CachePolicy::lru ? num_blocks : 0)
    , lfu_keys_(policy == CachePolicy::lfu ? static_cast<std::size_t>(num_blocks) : 0)
    , in_lfu_(lfu_keys_.size(), 0) {}

std::size_t ReclaimOrder::size() const {
    return policy_ == CachePolicy::lru ? lru_.size() : lfu_.size();
}

bool ReclaimOrder::contains(BlockId block) const {
    return policy_ == CachePolicy::lru ? lru_.contains(block)
                                       : in_lfu_[static_cast<std::size_t>(block)] != 0;
}

void ReclaimOrder::push(BlockId block, std::int64_t uses) {
    ++releases_;
    if (policy_ == CachePolicy::lru) {
        lru_.push_back(block);
        return;
    }
    const auto i = static_cast<std::size_t>(block);
    if (in_lfu_[i]) {
        throw std::logic_error("block " + std::to_string(block) + " cached twice");
    }
    lfu_keys_[i] = LfuKey{.uses = uses, .released = releases_, .block = block};
    lfu_.insert(lfu_keys_[i]);
    in_lfu_[i] = 1;
}

void ReclaimOrder::erase(BlockId block) {
    if (policy_ == CachePolicy::lru) {
        lru_.erase(block);
        return;
    }
    const auto i = static_cast<std::size_t>(block);
    if (!in_lfu_[i]) {
        throw std::logic_error("block " + std::to_string(block) + " is not cached");
    }
    lfu_.erase(lfu_keys_[i]);
    in_lfu_[i] = 0;
}

BlockId ReclaimOrder::pop() {
    if (policy_ == CachePolicy::lru) {
        return lru_.pop_front();
    }
    if (lfu_.empty()) {
        throw std::logic_error("reclaiming from an empty cache");
    }
    const BlockId block = lfu_.begin()->block;
    lfu_.erase(lfu_.begin());
    in_lfu_[static_cast<std::size_t>(block)] = 0;
    return block;
}

} // namespace kvscope::kv
