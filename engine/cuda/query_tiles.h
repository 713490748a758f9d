// Query tiles: how a step's tokens are grouped for the tensor-core attention
// (kernels/tile_attention.cuh). A tile is a run of consecutive tokens of one
// sequence, at most `tile_tokens` long: a prefill chunk (or a speculative
// verification's few tokens) is cut into tiles, whose kernel reads each K/V
// row once for the whole tile where the per-token path reads it once per
// token. A sequence with fewer than kShortestTiledRun tokens in the step (a
// decode, a verification of one or two drafts) stays on the per-token vector
// path, tuned for it: a tile's block is sized for 16 to 64 rows. Both write
// the same partial results, which one merge combines. Host-only, so the CPU
// tests check it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvscope::cuda {

inline constexpr int kShortestTiledRun = 4;

struct QueryTiles {
    // Tile i holds tokens [bounds[2i], bounds[2i + 1]).
    std::vector<std::int32_t> bounds;
    // The tokens of sequences with fewer than kShortestTiledRun tokens, in
    // order: the per-token path's.
    std::vector<std::int32_t> untiled_tokens;

    std::int64_t count() const { return static_cast<std::int64_t>(bounds.size() / 2); }
};

// Cuts a step's tokens (ForwardBatch::sequence_of, whose tokens of one
// sequence are consecutive) into tiles of at most `tile_tokens`; no tiles
// when no sequence has kShortestTiledRun tokens. Throws
// std::invalid_argument for tile_tokens < 1.
QueryTiles plan_query_tiles(std::span<const std::int32_t> sequence_of, int tile_tokens);

// Cache entries per attention split for a tiled step: halving from
// `longest` to `shortest` (powers of two, whole stages of the tile kernel)
// until the grid has `blocks_per_multiprocessor` blocks of work per
// multiprocessor, counting the blocks that have work: a tile (or a
// untiled token) over c entries has ceil(c / length) splits, not the
// longest context's (the early tiles of a causal prefill see few entries).
// The tiles' and the untiled tokens' blocks are counted together, though
// their kernels run one after the other; a sliding window's shorter
// attention is not counted. cache_positions: the step's (ForwardBatch's).
int tiled_split_length(const QueryTiles& tiles, std::span<const std::int32_t> cache_positions,
                       int kv_heads, int multiprocessors, int longest, int shortest,
                       int blocks_per_multiprocessor);

} // namespace kvscope::cuda
