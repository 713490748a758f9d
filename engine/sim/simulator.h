// Replays a request trace through the engine's own KV manager and scheduler
// (sched::LlmEngine) over a SimulatedBackend: nothing is computed, a clock
// advances by the cost model, and what the prefix cache, eviction and
// preemption do is what a live run with that cache would do. Requests come
// in at their trace times (the clock jumps over idle stretches); each ended
// request is summed up and forgotten, so memory follows what runs, not the
// trace's length.
//
// A cluster is several such engines, each with its own cache and clock, and
// a router (router.h) that sends each request to one as it arrives; the
// nodes step in simulated-time order, so the router sees every node as it
// is at the arrival.
#pragma once

#include "engine/events/engine_event.h"
#include "engine/kv/cache_policy.h"
#include "engine/sched/scheduler.h"
#include "engine/sim/cost_model.h"
#include "engine/sim/router.h"
#include "engine/sim/trace_reader.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kvscope::sim {

struct SimulationConfig {
    int block_size = 16;
    int num_blocks = 0; // the KV capacity (of each node)
    std::int64_t bytes_per_block = 0;
    bool prefix_caching = true;
    kv::CachePolicy cache_policy = kv::CachePolicy::lru;
    int nodes = 1;
    RouterKind router = RouterKind::round_robin;
    sched::SchedulerConfig scheduler;
    CostModel cost;
    std::int64_t max_requests = 0; // 0: the whole trace
};

struct Percentiles {
    double p50 = 0;
    double p90 = 0;
    double p99 = 0;
    double mean = 0;
};

struct SimulationResult {
    std::int64_t requests = 0; // read from the trace (a node's: routed to it)
    std::int64_t finished = 0;
    std::int64_t rejected = 0; // could never fit the cache or the limits
    std::int64_t preemptions = 0;
    // The prefix cache at each request's first admission:
    std::int64_t prompt_tokens = 0;
    std::int64_t hit_tokens = 0;
    std::int64_t blocks_hit = 0;
    std::int64_t blocks_missed = 0;
    double request_hit_sum = 0; // sum over finished requests of hit / prompt tokens
    double hit_ratio_blocks() const;
    double hit_ratio_tokens() const;
    double hit_ratio_request_mean() const;
    // Seconds on the simulated clock, from the trace's arrival times:
    Percentiles ttft_s;     // arrival to first token
    Percentiles tpot_s;     // per output token after the first
    Percentiles queue_s;    // arrival to first admission
    double simulated_s = 0; // the clock at the end (the latest node's)
    std::int64_t steps = 0;
    StepWork work;     // summed over steps
    double wall_s = 0; // what the replay took here
    std::int64_t trace_warnings = 0;
    // A cluster's nodes, each summed up alone (the fields above cover them
    // all); empty for one node.
    std::vector<SimulationResult> nodes;
};

// `progress` (may be empty) is told the requests read so far now and then
// (every 256 requests read, and every 1024 steps); returning false stops the
// replay early (what ran is still summed up).
using SimulationProgress = std::function<bool(std::int64_t requests_read)>;

// Throws TraceError for a bad trace line, std::invalid_argument for a bad
// config. `sink` (may be null; one node only) gets the engine's events
// stamped with the simulated clock (a recording of the replay).
SimulationResult simulate(TraceReader& trace, const SimulationConfig& config,
                          events::EventSink* sink = nullptr,
                          const SimulationProgress& progress = {});

// Opens a reader of the same trace each time it is called (from any thread).
using TraceOpener = std::function<std::unique_ptr<TraceReader>()>;

// Replays the trace once per config (a capacity sweep), each with its own
// reader and engine, as many at a time as there are cores (at most
// `threads` when not 0). `done` (may be empty) is told how many have ended,
// from whichever thread ended one. Rethrows the first failure.
// Raising `cancel` (may be null) stops every replay soon (what ran of each
// is summed up; those not begun come back empty).
std::vector<SimulationResult> simulate_each(const TraceOpener& open_trace,
                                            const std::vector<SimulationConfig>& configs,
                                            const std::function<void(std::size_t)>& done = {},
                                            unsigned threads = 0,
                                            const std::atomic<bool>* cancel = nullptr);

// A sweep's capacities: ten, each half the one above, down from `top`
// (ascending; a small top's repeated 1 block given once).
std::vector<std::int64_t> halving_capacities(std::int64_t top);

// The deployment a trace is replayed against unless told otherwise, not
// this machine: vLLM's scheduler defaults (256 sequences, 8,192 tokens a
// step) and Llama-3-8B at f16 on an H100 (its cost estimate, 131,072 bytes
// of K/V a token). kvscope simulate and the app's dialog both start here.
inline constexpr int kDeploymentMaxSeqs = 256;
inline constexpr int kDeploymentMaxBatchedTokens = 8192;
inline constexpr std::int64_t kDeploymentBytesPerToken = 131'072;
SimulationConfig deployment_config(int block_size);

// What a sweep replays: each policy with each capacity, policy by policy;
// one capacity with `halving` becomes halving_capacities() of it.
std::vector<SimulationConfig> sweep_configs(const SimulationConfig& base,
                                            std::vector<std::int64_t> capacities,
                                            const std::vector<kv::CachePolicy>& policies,
                                            bool halving);

// The configuration as one JSON object (a recording's settings, reports).
std::string config_json(const SimulationConfig& config);

} // namespace kvscope::sim
