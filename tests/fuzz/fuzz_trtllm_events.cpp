// TensorRT-LLM's KV-cache events as JSON (what /kv_cache_events answers),
// decoded and applied to the resident blocks the attach views show. The
// decoder's contract: never throws; what it decodes applies cleanly.
#include "profiler/attach/resident_blocks.h"
#include "profiler/attach/trtllm_events.h"

#include <string_view>

using namespace kvscope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const attach::TrtllmDecodeResult result = attach::decode_trtllm_events(text, 1.7e9);
    attach::ResidentBlocks blocks;
    for (const attach::KvEventBatch& batch : result.batches) {
        blocks.apply(batch);
    }
    for (const auto& [key, tier] : blocks.tiers()) {
        (void)blocks.trees(key);
        for (const auto& [hash, length] : blocks.in_tree_order(key)) {
            (void)blocks.prefix_tokens(key, hash);
            (void)length;
        }
    }
    return 0;
}
