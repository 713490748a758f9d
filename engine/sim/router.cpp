#include "engine/sim/router.h"

#include <tuple>

namespace kvscope::sim {

std::string_view router_name(RouterKind kind) {
    switch (kind) {
    case RouterKind::round_robin:
        return "round-robin";
    case RouterKind::cache_aware:
        return "cache-aware";
    }
    return "round-robin";
}

std::optional<RouterKind> parse_router(std::string_view name) {
    for (const RouterKind kind : {RouterKind::round_robin, RouterKind::cache_aware}) {
        if (name == router_name(kind)) {
            return kind;
        }
    }
    return std::nullopt;
}

std::size_t cache_aware_node(std::int64_t prompt_blocks, std::span<const NodeView> nodes) {
    std::size_t best = 0;
    const auto key = [prompt_blocks](const NodeView& node) {
        const std::int64_t to_compute = prompt_blocks - node.cached_prefix_blocks;
        return std::tuple(to_compute + node.load_blocks, node.load_blocks, node.requests);
    };
    for (std::size_t i = 1; i < nodes.size(); ++i) {
        if (key(nodes[i]) < key(nodes[best])) {
            best = i;
        }
    }
    return best;
}

} // namespace kvscope::sim
