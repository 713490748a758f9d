// Decodes TensorRT-LLM's KV-cache events as its executor serialises them to
// JSON (tensorrt_llm/_utils.py, KVCacheEventSerializer; what
// `LLM.get_kv_cache_events()` returns and trtllm-serve's /kv_cache_events
// answers): a list of
//   {"event_id": N, "window_size": W, "attention_dp_rank": R (optional),
//    "data": {"type": "created", "num_blocks_per_cache_level": [gpu, host]}
//          | {"type": "stored", "parent_hash": H|null,
//             "blocks": [{"type": "stored_block", "block_hash": H,
//                         "tokens": [{"type": "unique_token", "token_id": T,
//                                     "token_extra_id": X}, ...],
//                         "cache_level": L, "priority": P}, ...]}
//          | {"type": "removed", "block_hashes": [H, ...]}
//          | {"type": "updated", "block_hash": H,
//             "cache_level": {"type": "event_diff", "old_value": L0, "new_value": L1} | null,
//             "priority": {...} | null}}
// into the same events vLLM's become: each TensorRT-LLM event one batch whose
// sequence is its event_id (so dropped events show as gaps), cache level 0 as
// medium "GPU" and 1 as "CPU" (the host offload pool), a cache-level update
// as a move between them. Removals do not name a level: they apply to
// whichever tier holds the block. Hashes are 64-bit integers. Like the
// msgpack decoder it never throws: unknown types and fields are counted, a
// wrong shape drops the event, text that is not JSON is an error.
#pragma once

#include "profiler/attach/kv_events.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope::attach {

struct TrtllmDecodeResult {
    std::vector<KvEventBatch> batches; // in the order given
    // The last "created" event's blocks per cache level (GPU, host), if any.
    std::vector<std::int64_t> blocks_per_cache_level;
    DecodeCounts counts;
    std::string error; // the first problem met; empty when none
};

// `received_ts`: the batches' timestamp (TensorRT-LLM's events carry none),
// seconds since the epoch.
TrtllmDecodeResult decode_trtllm_events(std::string_view json_text, double received_ts);

// "GPU" for level 0, "CPU" for 1, "LEVEL<n>" beyond.
std::string trtllm_medium(std::int64_t cache_level);

} // namespace kvscope::attach
