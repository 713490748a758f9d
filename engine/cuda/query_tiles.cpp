#include "engine/cuda/query_tiles.h"

#include <algorithm>
#include <stdexcept>

namespace kvscope::cuda {

QueryTiles plan_query_tiles(std::span<const std::int32_t> sequence_of, int tile_tokens) {
    if (tile_tokens <= 0) {
        throw std::invalid_argument("plan_query_tiles: tiles of at least one token are needed");
    }
    QueryTiles tiles;
    const auto tokens = static_cast<std::int32_t>(sequence_of.size());
    std::int32_t first = 0;
    while (first < tokens) { // one sequence's run of tokens at a time
        std::int32_t end = first + 1;
        while (end < tokens && sequence_of[static_cast<std::size_t>(end)] ==
                                   sequence_of[static_cast<std::size_t>(first)]) {
            ++end;
        }
        if (end - first < kShortestTiledRun) {
            for (std::int32_t t = first; t < end; ++t) {
                tiles.untiled_tokens.push_back(t);
            }
        } else {
            for (std::int32_t t = first; t < end; t += tile_tokens) {
                tiles.bounds.push_back(t);
                tiles.bounds.push_back(std::min(end, t + tile_tokens));
            }
        }
        first = end;
    }
    return tiles;
}

int tiled_split_length(const QueryTiles& tiles, std::span<const std::int32_t> cache_positions,
                       int kv_heads, int multiprocessors, int longest, int shortest,
                       int blocks_per_multiprocessor) {
    // The most entries a token of each tile, and each untiled token, attends.
    std::vector<std::int64_t> contexts;
    for (std::size_t i = 0; i + 1 < tiles.bounds.size(); i += 2) {
        std::int64_t longest_context = 0;
        for (std::int32_t t = tiles.bounds[i]; t < tiles.bounds[i + 1]; ++t) {
            longest_context = std::max<std::int64_t>(
                longest_context, cache_positions[static_cast<std::size_t>(t)] + 1);
        }
        contexts.push_back(longest_context);
    }
    for (const std::int32_t t : tiles.untiled_tokens) {
        contexts.push_back(cache_positions[static_cast<std::size_t>(t)] + 1);
    }
    const std::int64_t wanted = static_cast<std::int64_t>(std::max(blocks_per_multiprocessor, 1)) *
                                std::max(multiprocessors, 1);
    int length = longest;
    while (length > shortest) {
        std::int64_t blocks = 0;
        for (const std::int64_t context : contexts) {
            blocks += (context + length - 1) / length;
        }
        if (blocks * kv_heads >= wanted) {
            break;
        }
        length /= 2;
    }
    return length;
}

} // namespace kvscope::cuda
