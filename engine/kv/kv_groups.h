// How a model's layers share the paged KV cache. Layers that attend alike
// (the whole context, or a sliding window of W positions) form groups, each
// with its own block table per request, as in vLLM's hybrid KV-cache
// manager: a sliding group needs only the blocks its window still covers,
// so its table lets the older ones go while the global group's keeps all.
//
// Every group holds the same number of layers, so one pool of equal blocks
// serves them all (a block holds `layers_per_block` layers' K/V of
// block_size tokens, for whichever group took it). A model whose layers all
// attend alike is one group of all its layers: the plain paged cache.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvscope::kv {

struct KvGroup {
    std::int32_t window = 0; // positions a query attends (itself included); 0: all
    std::vector<int> layers; // the model's layers whose K/V its blocks hold, in order
};

struct KvGroupLayout {
    std::vector<KvGroup> groups; // whole-context groups first, then by window
    std::vector<int> group_of;   // per model layer
    std::vector<int> slot_of;    // per model layer: its place in its group's blocks
    int layers_per_block = 0;

    int group_count() const { return static_cast<int>(groups.size()); }
    int layers() const { return static_cast<int>(group_of.size()); }
    bool hybrid() const { return groups.size() > 1; }
    std::int32_t window(int group) const { return groups[static_cast<std::size_t>(group)].window; }
    // Per group, its window (what the KV manager needs to know of it).
    std::vector<std::int32_t> windows() const;

    // One group of every layer (a plain cache: nothing leaves the window).
    static KvGroupLayout single(int layers, std::int32_t window = 0);
    // Groups for layers attending over `layer_windows` (0: the whole
    // context). Each kind's layers are cut into groups of one size: the
    // larger kind's count when the kinds are within a quarter of each other,
    // else the smaller's (vLLM's rule, which keeps blocks few and padding
    // small; a kind's last group may hold fewer layers and leave slots empty).
    static KvGroupLayout for_windows(std::span<const std::int32_t> layer_windows);
};

// "global", "window 512".
std::string kv_group_kind(std::int32_t window);

} // namespace kvscope::kv
