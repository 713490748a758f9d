#include "engine/cuda/query_tiles.h"

#include <stdexcept>

namespace kvscope::cuda {

std::vector<std::int32_t> query_tile_starts(std::span<const std::int32_t> sequence_of,
                                            int tile_tokens) {
    if (tile_tokens <= 0) {
        throw std::invalid_argument("query_tile_starts: tiles of at least one token are needed");
    }
    std::vector<std::int32_t> starts;
    const auto tokens = static_cast<std::int32_t>(sequence_of.size());
    std::int32_t start = 0;
    for (std::int32_t t = 0; t < tokens; ++t) {
        const bool new_sequence = t == 0 || sequence_of[static_cast<std::size_t>(t)] !=
                                                sequence_of[static_cast<std::size_t>(t - 1)];
        if (new_sequence || t - start == tile_tokens) {
            starts.push_back(t);
            start = t;
        }
    }
    starts.push_back(tokens);
    return starts;
}

bool worth_tiling(std::int64_t tokens, std::int64_t tiles) {
    return tiles > 0 && tokens >= kTiledTokensPerTile * tiles;
}

} // namespace kvscope::cuda
