// Everything one serving run is made of: the model, the backend, the KV
// cache's size and formats, eviction, the scheduler's limits and the
// workload. The CLI's options and the app's run panel both fill one in; a
// ServingSession turns it into a running engine.
#pragma once

#include "engine/kv/eviction_policy.h"
#include "engine/kv/kv_format.h"
#include "engine/kv/offload_tier.h"
#include "engine/sched/scheduler.h"
#include "engine/session/backend_factory.h"
#include "engine/session/cache_size.h"
#include "engine/spec/speculative_config.h"
#include "engine/workload/workload.h"

#include <string>
#include <vector>

namespace kvscope::session {

// The capacity a run gets when its size is not given: room for one request
// as long as SmolLM2's context, or many short ones.
inline constexpr std::int64_t kDefaultCacheTokens = 8192;

struct RunConfig {
    std::string model_path; // empty: $KVSCOPE_MODEL or the model setup.sh fetched
    BackendSpec backend;
    int block_size = 16;
    CacheSize cache; // none given: default_cache_tokens
    // The run's own need when `cache` gives no size (kvscope generate: its
    // one prompt and output).
    std::int64_t default_cache_tokens = kDefaultCacheTokens;
    kv::KvCacheFormat cache_format;
    // Sliding-window layers in their own block tables (kv_groups.h); off:
    // every layer keeps the whole context, as a plain paged cache does.
    bool hybrid_kv = true;
    // The longest a request may grow, prompt and output (vLLM's
    // --max-model-len); longer prompts are rejected, outputs stop there.
    // 0: the model's trained context.
    int max_model_len = 0;
    kv::EvictionConfig eviction;
    bool prefix_caching = true;
    kv::CachePolicy cache_policy = kv::CachePolicy::lru;
    sched::SchedulerConfig scheduler;
    spec::SpeculativeConfig speculative; // off unless asked for
    std::string draft_model_path;        // the draft model (DraftMethod::model)
    kv::OffloadTierConfig offload;       // capacity_blocks 0: no second tier
    bool offload_write_through = false;

    std::string workload = "shared-prefix"; // a preset name or a .jsonl trace
    // Requests given directly (kvscope generate's one prompt): served
    // instead of `workload` when not empty.
    std::vector<workload::WorkloadRequest> requests;
    workload::PresetOptions preset; // its seed also seeds each request's sampling
    float temperature = 0.0f;       // for requests that set none; 0 is greedy
    bool real_time = true;          // arrivals on the wall clock, else all at once

    bool record_ops = false; // per-op CPU slices as events (recordings, the app's timeline)
    bool token_text = false; // prompt and sampled token text in events

    // Why the settings cannot run (bad eviction budget, no room), or empty.
    std::string problem() const;
    // One line: "auto backend, 256 blocks x 16 (f16), prefix caching on, ...".
    std::string describe() const;
};

} // namespace kvscope::session
