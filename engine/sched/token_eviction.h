// Applies a token-eviction policy to one sequence: picks the survivors,
// copies them down so they sit contiguously from the start of the cache, and
// gives the blocks no longer needed back to the pool. Used by the serving
// loop and by `kvscope eval`, so both evict the same way.
#pragma once

#include "engine/kv/eviction_policy.h"
#include "engine/kv/kv_manager.h"
#include "engine/runner/backend.h"

#include <vector>

namespace kvscope::sched {

struct EvictionOutcome {
    std::int32_t evicted_tokens = 0;
    int blocks_released = 0;
    // The blocks rewritten with survivors, in sequence order, and how many
    // entries each now holds.
    std::vector<std::pair<kv::BlockId, std::int32_t>> rewritten;
};

// `kept`: ascending entry indices to keep (kv::select_kept). `scores`, when
// not empty, is compacted the same way. Leaves everything as it was when the
// pool cannot supply private copies of shared blocks.
EvictionOutcome compact_sequence(std::int64_t request, const std::vector<std::int32_t>& kept,
                                 kv::SequenceBlocks& sequence, std::vector<float>& scores,
                                 kv::KvManager& kv, runner::Backend& backend);

} // namespace kvscope::sched
