// What the CUDA backend cannot hold of a cache that the CPU backend can,
// without any CUDA header: the backend refuses it, and `--backend auto` takes
// the CPU for it (session/backend_factory.cpp).
#pragma once

#include "engine/kv/kv_format.h"
#include "engine/kv/kv_groups.h"

#include <string>

namespace kvscope::cuda {

// KIVI formats with a hybrid cache: the open blocks' bookkeeping
// (kivi_open_blocks.h) finalises a block once for every layer, and a hybrid
// cache's groups fill different blocks. Empty when the backend can hold it.
inline std::string cache_problem(const kv::KvGroupLayout& groups, const kv::KvCacheFormat& format) {
    if (groups.hybrid() &&
        (kv::quantises_whole_blocks(format.key) || kv::quantises_whole_blocks(format.value))) {
        return "the CUDA backend does not hold KIVI formats in a hybrid KV cache; turn the hybrid "
               "cache off (--disable-hybrid-kv-cache-manager) or choose another format";
    }
    return {};
}

} // namespace kvscope::cuda
