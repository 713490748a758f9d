// Query tiles: how a step's tokens are grouped for the tensor-core attention
// (kernels/tile_attention.cuh). A tile is a run of consecutive tokens of one
// sequence, at most `tile_tokens` long (a prefill chunk is cut into tiles of
// that many; a decode is a tile of one). The kernel reads each K/V row once
// for a whole tile, where the vector path reads it once per token, and
// computes the tile's scores with matrix instructions. Host-only, so the
// CPU tests check it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvscope::cuda {

// The first token of every tile, then the token count: tile i holds tokens
// [starts[i], starts[i + 1]). `sequence_of` is the step's (ForwardBatch's),
// whose tokens of one sequence are consecutive.
std::vector<std::int32_t> query_tile_starts(std::span<const std::int32_t> sequence_of,
                                            int tile_tokens);

// Whether a step whose tokens fall into `tiles` tiles takes the tile path:
// when its tiles average at least kTiledTokensPerTile tokens (prefill chunks,
// speculative verification). A step of decodes alone, one token a tile,
// stays on the vector path, tuned for it.
inline constexpr int kTiledTokensPerTile = 4;
bool worth_tiling(std::int64_t tokens, std::int64_t tiles);

} // namespace kvscope::cuda
