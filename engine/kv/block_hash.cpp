#include "engine/kv/block_hash.h"

namespace kvscope::kv {
namespace {

// splitmix64's finaliser: every input bit reaches every output bit.
std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

} // namespace

BlockHash hash_block(BlockHash parent, std::span<const std::int32_t> tokens,
                     std::uint64_t extra_key) {
    std::uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ull);
    h = mix(h ^ extra_key);
    for (const std::int32_t token : tokens) {
        h = mix(h + static_cast<std::uint32_t>(token));
    }
    return mix(h ^ tokens.size());
}

} // namespace kvscope::kv
