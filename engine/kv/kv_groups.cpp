#include "engine/kv/kv_groups.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace kvscope::kv {

std::vector<std::int32_t> KvGroupLayout::windows() const {
    std::vector<std::int32_t> result;
    result.reserve(groups.size());
    for (const KvGroup& group : groups) {
        result.push_back(group.window);
    }
    return result;
}

KvGroupLayout KvGroupLayout::single(int layers, std::int32_t window) {
    const std::vector<std::int32_t> windows(static_cast<std::size_t>(std::max(0, layers)), window);
    return for_windows(windows);
}

KvGroupLayout KvGroupLayout::for_windows(std::span<const std::int32_t> layer_windows) {
    if (layer_windows.empty()) {
        throw std::invalid_argument("a KV cache needs at least one layer");
    }
    // Layers by kind; the map orders the kinds whole-context (0) first.
    std::map<std::int32_t, std::vector<int>> kinds;
    for (std::size_t l = 0; l < layer_windows.size(); ++l) {
        if (layer_windows[l] < 0) {
            throw std::invalid_argument("a layer's attention window cannot be negative");
        }
        kinds[layer_windows[l]].push_back(static_cast<int>(l));
    }
    std::size_t fewest = layer_windows.size();
    std::size_t most = 0;
    for (const auto& [window, layers] : kinds) {
        fewest = std::min(fewest, layers.size());
        most = std::max(most, layers.size());
    }
    const std::size_t per_block = 4 * most < 5 * fewest ? most : fewest;

    KvGroupLayout layout;
    layout.layers_per_block = static_cast<int>(per_block);
    layout.group_of.assign(layer_windows.size(), 0);
    layout.slot_of.assign(layer_windows.size(), 0);
    for (const auto& [window, layers] : kinds) {
        for (std::size_t first = 0; first < layers.size(); first += per_block) {
            KvGroup group;
            group.window = window;
            const std::size_t last = std::min(layers.size(), first + per_block);
            for (std::size_t i = first; i < last; ++i) {
                const auto l = static_cast<std::size_t>(layers[i]);
                layout.group_of[l] = layout.group_count();
                layout.slot_of[l] = static_cast<int>(i - first);
                group.layers.push_back(layers[i]);
            }
            layout.groups.push_back(std::move(group));
        }
    }
    return layout;
}

std::string kv_group_kind(std::int32_t window) {
    return window > 0 ? "window " + std::to_string(window) : "global";
}

} // namespace kvscope::kv
