// What one live run in the app is made of: the run panel edits it, the
// teaching presets fill it in, the engine controller builds the engine from
// it. Qt-free values; defaults make a run that shows paging, prefix hits and
// a full timeline within seconds on a laptop CPU.
#pragma once

#include "engine/kv/eviction_policy.h"
#include "engine/kv/kv_format.h"
#include "engine/sched/scheduler.h"

#include <cstdint>
#include <string>

namespace kvscope::ui {

struct RunSettings {
    std::string model_path; // empty: $KVSCOPE_MODEL or the model setup.sh fetched
    std::string backend = "cpu";
    int threads = 0; // 0: all hardware threads
    int block_size = 16;
    int cache_blocks = 256; // KV-cache capacity in blocks
    // When above 0, the capacity in bytes instead: as many blocks as fit in
    // the chosen formats (known once the model's shape is).
    std::int64_t cache_bytes = 0;
    kv::KvCacheFormat cache_format;
    kv::EvictionConfig eviction;
    bool prefix_caching = true;
    sched::SchedulerConfig scheduler;
    std::string workload = "shared-prefix"; // a preset name or a .jsonl trace
    int requests = 24;
    double rate = 3.0; // requests per second
    int max_tokens = 48;
    std::uint64_t seed = 1;
    float temperature = 0.0f;
    std::string record_path; // empty: not recorded

    RunSettings();
    // Why the settings cannot run (bad eviction budget, zero blocks); empty
    // when they can.
    std::string problem() const;
    // One line for the status bar: "cpu, 256 blocks x 16 (f16), prefix caching on, ...".
    std::string describe() const;
};

} // namespace kvscope::ui
