// Chained block hashes for prefix caching: a full block's hash covers its
// parent's hash, its tokens and any extra keys (a LoRA id, a cache salt), so
// equal hashes mean equal whole prefixes. 64-bit, so the manager also compares
// tokens on a hit and a collision can never serve wrong K/V.
#pragma once

#include <cstdint>
#include <span>

namespace kvscope::kv {

using BlockHash = std::uint64_t;

// The parent hash of a sequence's first block.
inline constexpr BlockHash kRootBlockHash = 0x6b7673636f706521ull;

BlockHash hash_block(BlockHash parent, std::span<const std::int32_t> tokens,
                     std::uint64_t extra_key = 0);

} // namespace kvscope::kv
