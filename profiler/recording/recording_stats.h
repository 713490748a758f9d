// Summaries of a recording in the manner of `nsys stats`: steps, requests
// (time to first token, time per output token), the prefix cache, block
// occupancy, preemption and eviction, all computed from the events alone so
// they work on a recording that was cut short.
#pragma once

#include "engine/spec/speculation_totals.h"
#include "profiler/attach/attached_metrics.h"
#include "profiler/gate/time_by_name.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kvscope::profiler {

struct Distribution {
    std::int64_t count = 0;
    double mean = 0;
    double p50 = 0;
    double p90 = 0;
    double p99 = 0;
    double max = 0;

    static Distribution of(std::vector<double> samples);
};

// An attached engine's stream as the recording tells it (kvscope attach).
struct AttachedTierStats {
    std::int64_t rank = 0;
    std::string medium;
    std::int64_t resident_blocks = 0; // at the end
    std::int64_t peak_resident_blocks = 0;
};

struct AttachedSourceStats {
    std::int64_t source = 0;
    std::string endpoint;
    std::int64_t blocks_stored = 0;
    std::int64_t blocks_removed = 0;
    std::int64_t removed_not_resident = 0; // stored before we attached (or lost)
    std::int64_t clears = 0;               // AllBlocksCleared
    std::int64_t restarts = 0;             // the publisher began again
    std::int64_t events = 0;               // KV events received, as last reported
    std::int64_t lost = 0;                 // batches neither stream nor replay gave
    std::int64_t bad_rows = 0;             // rows whose detail did not parse
    std::int64_t capacity_blocks = 0;      // as given, else the engine's metrics'; 0: unknown
    std::int64_t metric_samples = 0;       // AttachedMetric rows (--metrics)
    attach::MetricsSummary metrics;        // the engine's own, as last polled
    std::vector<AttachedTierStats> tiers;
};

struct RecordingStats {
    std::string path;
    std::string run_config;      // JSON, as recorded
    bool steps_in_turns = false; // recorded by kvscope gate in step with another build
    std::int64_t events = 0;
    double duration_s = 0;

    std::int64_t steps = 0;
    Distribution step_ms;
    std::int64_t prefill_tokens = 0;
    std::int64_t decode_tokens = 0;

    std::int64_t requests = 0;
    std::int64_t finished = 0;
    std::int64_t aborted = 0;
    std::int64_t rejected = 0;
    Distribution ttft_ms;
    Distribution tpot_ms;
    std::int64_t generated_tokens = 0;

    std::int64_t prompt_tokens = 0;     // at first admission
    std::int64_t prefix_hit_tokens = 0; // at first admission
    double prefix_hit_rate = 0;
    std::int64_t preemptions = 0;
    std::int64_t evicted_tokens = 0;
    spec::SpeculationTotals speculation; // from draft_verified events
    // The offload tier, from block_offloaded and block_reloaded events.
    struct TierTotals {
        std::int64_t offloaded = 0;
        std::int64_t reloaded = 0;
        std::int64_t dropped = 0; // let go by the full tier
        std::int64_t bytes_written = 0;
        std::int64_t bytes_read = 0;
        double write_ms = 0;
        double read_ms = 0;
        std::int64_t loaded_tokens = 0; // reloaded blocks' tokens: prefill not run
        // What computing them would have cost at this run's own rate: the
        // time per token of its prefill steps (nine tenths prompt tokens or
        // more; 0 without such steps).
        double prefill_ms_per_token = 0;
        double recompute_ms_estimate = 0;
    } tier;

    std::int64_t total_blocks = 0;
    std::int64_t peak_used_blocks = 0;
    double mean_used_blocks = 0;
    double mean_cached_blocks = 0;

    // A hybrid cache's groups (group_blocks events; none for a plain cache).
    struct KvGroupStats {
        std::int32_t window = 0; // 0: the whole context
        std::int64_t peak_used_blocks = 0;
        double mean_used_blocks = 0;
        std::int64_t blocks_left_window = 0; // let go as the window moved past them
        std::int64_t samples = 0;
    };
    std::vector<KvGroupStats> kv_groups; // by group number

    std::int64_t kv_bytes_used_peak = 0; // bytes in used blocks, at the peak
    std::int64_t kv_bytes_per_block = 0;
    std::string kv_formats; // "f16", "K q8_0, V q4_0"

    // Time by name: CPU ops, GPU kernels and copies, NVTX ranges.
    TimeSummaries times;

    // Attached engines, in source order (empty for a kvscope run).
    std::vector<AttachedSourceStats> attached;

    // What the steps cost (step_counters events; recordings older than them
    // have none): the engine thread's CPU time, and hardware counters where
    // the kernel allowed them (-1 when any step went uncounted).
    struct StepCosts {
        std::int64_t steps = 0; // steps with counters
        double cpu_ms = 0;
        std::int64_t instructions = -1;
        std::int64_t cycles = -1;
        std::int64_t kv_entries_read = 0; // attended cache entries, per layer
    } costs;
    // Work that depends on the workload alone (compared exactly): cache
    // entries written are the tokens computed; bytes at the cache's format.
    std::int64_t computed_tokens() const { return prefill_tokens + decode_tokens; }
    std::int64_t kv_bytes_written() const;
    std::int64_t kv_bytes_read() const;
    // A hybrid cache: an estimate of the bytes a plain cache of the same
    // model would have held at the peak (every layer keeping what the
    // whole-context layers kept, plain_cache_scale.h), or 0 for a plain
    // cache, one with no whole-context group, or settings that do not say.
    std::int64_t plain_cache_peak_bytes() const;
    std::int64_t block_size = 0;

    // Per-step and per-request samples, for compare's statistical tests.
    std::vector<double> step_cpu_ms_samples;
    // Tokens each step computed (prefill and decode), in step order: two runs
    // whose steps did the same work step by step can be compared step by step.
    std::vector<std::int64_t> step_tokens;
    std::vector<double> step_ms_samples;
    std::vector<double> ttft_ms_samples;
    std::vector<double> tpot_ms_samples;
};

// Throws RecordingError with the reason when the file is not a readable
// recording.
RecordingStats compute_stats(const std::filesystem::path& path);

} // namespace kvscope::profiler
