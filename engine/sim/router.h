// How a simulated cluster's router picks the node for each request.
//   round-robin  in turn, blind to the caches (a plain load balancer)
//   cache-aware  where the request costs least: the prompt blocks it would
//                compute there (those not in that node's prefix cache) plus
//                the blocks the node already holds or has queued - the cost
//                NVIDIA Dynamo's KV router minimises by default (prefix
//                overlap against load, weight 1), so a shared prefix draws
//                its requests to one node until that node is busier than
//                recomputing the prefix elsewhere
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kvscope::sim {

enum class RouterKind { round_robin, cache_aware };

std::string_view router_name(RouterKind kind);
std::optional<RouterKind> parse_router(std::string_view name);

// What the cache-aware router sees of one node when a request arrives.
struct NodeView {
    std::int64_t cached_prefix_blocks = 0; // of this request's prompt, in the node's cache
    std::int64_t load_blocks = 0; // in use by its running requests, plus its queued prompts
    std::int64_t requests = 0;    // sent to it so far
};

// The cache-aware choice for a prompt of `prompt_blocks` blocks: the least
// cost, ties to the lighter load, then to the node sent fewest requests (so
// new prefixes spread over idle nodes), then the lower index. `nodes` not
// empty.
std::size_t cache_aware_node(std::int64_t prompt_blocks, std::span<const NodeView> nodes);

} // namespace kvscope::sim
