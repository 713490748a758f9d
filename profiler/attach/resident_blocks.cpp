#include "profiler/attach/resident_blocks.h"

#include <algorithm>
#include <type_traits>
#include <variant>

namespace kvscope::attach {

void ResidentBlocks::apply(const KvEventBatch& batch) {
    const std::int64_t rank = batch.rank.value_or(0);
    for (const KvEvent& event : batch.events) {
        apply(event, rank, batch.ts);
    }
}

void ResidentBlocks::apply(const KvEvent& event, std::int64_t rank, double ts) {
    std::visit(
        [&](const auto& e) {
            using E = std::decay_t<decltype(e)>;
            if constexpr (std::is_same_v<E, StoredBlocks>) {
                store(e, rank, ts);
            } else if constexpr (std::is_same_v<E, RemovedBlocks>) {
                remove(e, rank);
            } else if constexpr (std::is_same_v<E, MovedBlocks>) {
                move(e, rank);
            } else {
                static_assert(std::is_same_v<E, AllCleared>);
                // vLLM clears the whole prefix cache of the engine, every
                // tier; one publisher is one engine (one rank) but a batch
                // does not always say which, so the whole source goes.
                tiers_.clear();
                ++counts_.clears;
            }
        },
        event);
}

void ResidentBlocks::clear() {
    tiers_.clear();
    ++counts_.resets;
}

void ResidentBlocks::store(const StoredBlocks& event, std::int64_t rank, double ts) {
    if (event.hashes.empty()) {
        return; // no block, so no row in a recording: no tier either
    }
    Tier& tier = tiers_[TierKey{rank, event.medium}];
    std::optional<BlockHash> parent = event.parent;
    const auto block_size = static_cast<std::size_t>(std::max<std::int64_t>(event.block_size, 0));
    for (std::size_t i = 0; i < event.hashes.size(); ++i) {
        ResidentBlock block;
        block.hash = event.hashes[i];
        block.parent = parent;
        block.block_size = event.block_size;
        block.lora_id = event.lora_id;
        block.group_idx = event.group_idx;
        block.stored_at = ts;
        // hashes[i] covers tokens [i * block_size, (i + 1) * block_size);
        // a short token list (not every publisher sends them all) gives what
        // it has.
        const std::size_t begin = std::min(i * block_size, event.token_ids.size());
        const std::size_t end = std::min(begin + block_size, event.token_ids.size());
        block.token_ids.assign(event.token_ids.begin() + static_cast<std::ptrdiff_t>(begin),
                               event.token_ids.begin() + static_cast<std::ptrdiff_t>(end));

        parent = block.hash; // the next block of the event continues this one
        counts_.restored += insert(tier, std::move(block)) ? 1 : 0;
        ++counts_.stored;
    }
}

bool ResidentBlocks::insert(Tier& tier, ResidentBlock block) {
    // One lookup: this runs for every block stored.
    const auto [it, added] = tier.blocks.try_emplace(block.hash);
    it->second = std::move(block);
    return !added;
}

void ResidentBlocks::move(const MovedBlocks& event, std::int64_t rank) {
    const auto from = tiers_.find(TierKey{rank, event.from_medium});
    for (const BlockHash& hash : event.hashes) {
        if (from == tiers_.end()) {
            ++counts_.unknown_removed; // we never saw it stored there
            continue;
        }
        const auto it = from->second.blocks.find(hash);
        if (it == from->second.blocks.end()) {
            ++counts_.unknown_removed;
            continue;
        }
        ResidentBlock block = std::move(it->second);
        from->second.blocks.erase(it);
        insert(tiers_[TierKey{rank, event.to_medium}], std::move(block));
        ++counts_.moved;
    }
}

void ResidentBlocks::remove(const RemovedBlocks& event, std::int64_t rank) {
    if (event.medium.empty()) {
        // Whichever tier of the rank holds each block.
        for (const BlockHash& hash : event.hashes) {
            RemovedBlocks one{{hash}, kDefaultMedium, event.group_idx};
            for (const auto& [key, tier] : tiers_) {
                if (key.rank == rank && tier.blocks.contains(hash)) {
                    one.medium = key.medium;
                    break;
                }
            }
            remove(one, rank);
        }
        return;
    }
    const auto tier_it = tiers_.find(TierKey{rank, event.medium});
    for (const BlockHash& hash : event.hashes) {
        if (tier_it == tiers_.end()) {
            ++counts_.unknown_removed;
            continue;
        }
        Tier& tier = tier_it->second;
        const auto it = tier.blocks.find(hash);
        if (it == tier.blocks.end()) {
            ++counts_.unknown_removed;
            continue;
        }
        // Its children stay: they are still resident, now roots of the
        // visible forest (vLLM evicts leaves first, but other tiers need not).
        tier.blocks.erase(it);
        ++counts_.removed;
    }
}

const ResidentBlocks::Tier* ResidentBlocks::tier(const TierKey& key) const {
    const auto it = tiers_.find(key);
    return it == tiers_.end() ? nullptr : &it->second;
}

const ResidentBlock* ResidentBlocks::find(const TierKey& key, const BlockHash& hash) const {
    const Tier* t = tier(key);
    if (t == nullptr) {
        return nullptr;
    }
    const auto it = t->blocks.find(hash);
    return it == t->blocks.end() ? nullptr : &it->second;
}

std::vector<BlockHash> ResidentBlocks::children(const TierKey& key, const BlockHash& parent) const {
    std::vector<BlockHash> out;
    if (const Tier* t = tier(key)) {
        for (const auto& [hash, block] : t->blocks) {
            if (block.parent == parent) {
                out.push_back(hash);
            }
        }
    }
    return out;
}

namespace {

// parent hash -> its resident children, for one walk of a tier's forest.
std::unordered_map<BlockHash, std::vector<BlockHash>>
children_index(const ResidentBlocks::Tier& tier) {
    std::unordered_map<BlockHash, std::vector<BlockHash>> index;
    index.reserve(tier.blocks.size());
    for (const auto& [hash, block] : tier.blocks) {
        if (block.parent) {
            index[*block.parent].push_back(hash);
        }
    }
    return index;
}

} // namespace

std::vector<BlockHash> ResidentBlocks::roots(const TierKey& key) const {
    const Tier* t = tier(key);
    if (t == nullptr) {
        return {};
    }
    std::vector<BlockHash> out;
    for (const auto& [hash, block] : t->blocks) {
        if (!block.parent || !t->blocks.contains(*block.parent)) {
            out.push_back(hash);
        }
    }
    return out;
}

std::vector<PrefixTree> ResidentBlocks::trees(const TierKey& key) const {
    const Tier* t = tier(key);
    std::vector<PrefixTree> out;
    if (t == nullptr) {
        return out;
    }
    // Iterative depth-first walk: chains thousands of blocks long must not
    // recurse. A hash is visited once even if a hostile stream made a cycle.
    const auto children = children_index(*t);
    std::unordered_set<BlockHash> seen;
    std::vector<std::pair<BlockHash, std::int64_t>> stack; // block, its depth
    for (const BlockHash& root : roots(key)) {
        PrefixTree tree;
        tree.root = root;
        stack.assign(1, {root, 1});
        while (!stack.empty()) {
            const auto [hash, depth] = stack.back();
            stack.pop_back();
            if (!seen.insert(hash).second) {
                continue;
            }
            const auto block = t->blocks.find(hash);
            if (block == t->blocks.end()) {
                continue;
            }
            ++tree.blocks;
            tree.depth = std::max(tree.depth, depth);
            tree.tokens += static_cast<std::int64_t>(block->second.token_ids.size());
            if (const auto kids = children.find(hash); kids != children.end()) {
                for (const BlockHash& child : kids->second) {
                    stack.emplace_back(child, depth + 1);
                }
            }
        }
        out.push_back(tree);
    }
    std::sort(out.begin(), out.end(), [](const PrefixTree& x, const PrefixTree& y) {
        return x.blocks != y.blocks ? x.blocks > y.blocks : x.depth > y.depth;
    });
    return out;
}

std::vector<std::pair<BlockHash, std::int32_t>>
ResidentBlocks::in_tree_order(const TierKey& key) const {
    const Tier* t = tier(key);
    std::vector<std::pair<BlockHash, std::int32_t>> out;
    if (t == nullptr) {
        return out;
    }
    out.reserve(t->blocks.size());
    const auto children = children_index(*t);
    std::unordered_set<BlockHash> seen;
    std::vector<BlockHash> stack;
    std::vector<BlockHash> kids;
    const std::vector<PrefixTree> forest = trees(key);
    for (std::size_t index = 0; index < forest.size(); ++index) {
        stack.assign(1, forest[index].root);
        while (!stack.empty()) {
            const BlockHash hash = stack.back();
            stack.pop_back();
            if (!t->blocks.contains(hash) || !seen.insert(hash).second) {
                continue;
            }
            out.emplace_back(hash, static_cast<std::int32_t>(index));
            if (const auto it = children.find(hash); it != children.end()) {
                // Children in a fixed order (by bytes), so the layout is the
                // same each time it is drawn.
                kids.assign(it->second.begin(), it->second.end());
                std::sort(kids.begin(), kids.end(), [](const BlockHash& x, const BlockHash& y) {
                    return std::lexicographical_compare(x.data.begin(), x.data.begin() + x.size,
                                                        y.data.begin(), y.data.begin() + y.size);
                });
                stack.insert(stack.end(), kids.rbegin(), kids.rend());
            }
        }
    }
    return out;
}

std::vector<std::int64_t> ResidentBlocks::prefix_tokens(const TierKey& key,
                                                        const BlockHash& hash) const {
    const Tier* t = tier(key);
    if (t == nullptr) {
        return {};
    }
    std::vector<const ResidentBlock*> chain;
    std::unordered_set<BlockHash> seen;
    for (auto it = t->blocks.find(hash); it != t->blocks.end() && seen.insert(it->first).second;) {
        chain.push_back(&it->second);
        if (!it->second.parent) {
            break;
        }
        it = t->blocks.find(*it->second.parent);
    }
    std::vector<std::int64_t> tokens;
    for (auto block = chain.rbegin(); block != chain.rend(); ++block) {
        tokens.insert(tokens.end(), (*block)->token_ids.begin(), (*block)->token_ids.end());
    }
    return tokens;
}

std::size_t ResidentBlocks::size() const {
    std::size_t total = 0;
    for (const auto& [key, t] : tiers_) {
        total += t.blocks.size();
    }
    return total;
}

} // namespace kvscope::attach
