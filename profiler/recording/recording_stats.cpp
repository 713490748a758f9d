#include "profiler/recording/recording_stats.h"

#include "engine/events/typed_events.h"
#include "profiler/attach/attached_events.h"
#include "profiler/recording/event_rows.h"
#include "profiler/recording/recording.h"
#include "profiler/store/plain_cache_scale.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

namespace kvscope::profiler {
namespace {

using events::EventKind;

struct RequestTimes {
    std::int64_t arrived = -1;
    std::int64_t first_token = -1;
    std::int64_t finished = -1;
    std::int64_t generated = 0;
    bool looked_up = false;
};

double at(const std::vector<double>& sorted, double q) {
    const auto index = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(index, sorted.size() - 1)];
}

// One accumulator per concern of the stats: each takes the events it knows
// (add() says whether it took one) and writes its part of `s` as events
// come and at the end (finish()).

// Steps: their wall and CPU time, hardware counters and tokens.
class StepsSeen {
public:
    explicit StepsSeen(RecordingStats& s)
        : s_(s) {}

    bool add(const events::EngineEvent& event) {
        switch (event.kind) {
        case EventKind::step_begin:
            begin_[events::as<events::StepBegin>(event).step] = event.time_ns;
            return true;
        case EventKind::step_counters: {
            const auto cost = events::as<events::StepCounters>(event);
            const double cpu_ms = static_cast<double>(cost.cpu_ns) * 1e-6;
            ++s_.costs.steps;
            s_.costs.cpu_ms += cpu_ms;
            s_.step_cpu_ms_samples.push_back(cpu_ms);
            s_.costs.kv_entries_read += cost.kv_entries_read;
            every_step_counted_ = every_step_counted_ && cost.instructions >= 0 && cost.cycles >= 0;
            if (every_step_counted_) {
                s_.costs.instructions =
                    std::max<std::int64_t>(0, s_.costs.instructions) + cost.instructions;
                s_.costs.cycles = std::max<std::int64_t>(0, s_.costs.cycles) + cost.cycles;
            }
            return true;
        }
        case EventKind::step_end: {
            const auto end = events::as<events::StepEnd>(event);
            if (const auto it = begin_.find(end.step); it != begin_.end()) {
                const double ms = static_cast<double>(event.time_ns - it->second) * 1e-6;
                s_.step_ms_samples.push_back(ms);
                // A step that computed a whole prompt also sampled its
                // first token: steps nine tenths prompt or more count.
                if (end.prefill_tokens > 0 && end.prefill_tokens >= 9 * end.decode_tokens) {
                    prefill_only_ms_ += ms;
                    prefill_only_tokens_ += end.prefill_tokens + end.decode_tokens;
                }
            }
            ++s_.steps;
            s_.step_tokens.push_back(end.prefill_tokens + end.decode_tokens);
            s_.prefill_tokens += end.prefill_tokens;
            s_.decode_tokens += end.decode_tokens;
            return true;
        }
        default:
            return false;
        }
    }

    void finish() {
        if (!every_step_counted_) {
            s_.costs.instructions = -1;
            s_.costs.cycles = -1;
        }
        s_.step_ms = Distribution::of(s_.step_ms_samples);
    }

    // What a prompt token took in steps that computed prompts (almost)
    // only; 0 when there were none.
    double prefill_ms_per_token() const {
        return prefill_only_tokens_ > 0
                   ? prefill_only_ms_ / static_cast<double>(prefill_only_tokens_)
                   : 0;
    }

private:
    RecordingStats& s_;
    std::map<std::int64_t, std::int64_t> begin_; // step index -> t_ns
    bool every_step_counted_ = true;
    double prefill_only_ms_ = 0;
    std::int64_t prefill_only_tokens_ = 0;
};

// Requests: how they ended, their prefix hits and their latencies.
class RequestsSeen {
public:
    explicit RequestsSeen(RecordingStats& s)
        : s_(s) {}

    bool add(const events::EngineEvent& event) {
        switch (event.kind) {
        case EventKind::request_arrived:
            requests_[event.request].arrived = event.time_ns;
            ++s_.requests;
            return true;
        case EventKind::prefix_lookup: {
            const auto lookup = events::as<events::PrefixLookup>(event);
            RequestTimes& r = requests_[lookup.request];
            if (!r.looked_up) { // first admission only: re-admissions are not new hits
                r.looked_up = true;
                s_.prefix_hit_tokens += lookup.hit_tokens;
                s_.prompt_tokens += lookup.prompt_tokens;
            }
            return true;
        }
        case EventKind::first_token:
            requests_[event.request].first_token = event.time_ns;
            return true;
        case EventKind::request_finished: {
            const auto finished = events::as<events::RequestFinished>(event);
            RequestTimes& r = requests_[finished.request];
            r.finished = event.time_ns;
            r.generated = finished.generated_tokens;
            s_.generated_tokens += finished.generated_tokens;
            ++s_.finished;
            return true;
        }
        case EventKind::request_aborted:
            ++s_.aborted;
            return true;
        case EventKind::request_rejected:
            ++s_.rejected;
            return true;
        case EventKind::request_preempted:
            ++s_.preemptions;
            return true;
        case EventKind::tokens_evicted:
            s_.evicted_tokens += events::as<events::TokensEvicted>(event).tokens;
            return true;
        default:
            return false;
        }
    }

    void finish() {
        for (const auto& [id, r] : requests_) {
            if (r.arrived >= 0 && r.first_token >= 0) {
                s_.ttft_ms_samples.push_back(static_cast<double>(r.first_token - r.arrived) * 1e-6);
            }
            if (r.first_token >= 0 && r.finished >= 0 && r.generated > 1) {
                s_.tpot_ms_samples.push_back(static_cast<double>(r.finished - r.first_token) *
                                             1e-6 / static_cast<double>(r.generated - 1));
            }
        }
        s_.ttft_ms = Distribution::of(s_.ttft_ms_samples);
        s_.tpot_ms = Distribution::of(s_.tpot_ms_samples);
        s_.prefix_hit_rate = s_.prompt_tokens > 0 ? static_cast<double>(s_.prefix_hit_tokens) /
                                                        static_cast<double>(s_.prompt_tokens)
                                                  : 0;
    }

private:
    RecordingStats& s_;
    std::map<std::int64_t, RequestTimes> requests_;
};

// The KV cache: blocks in use and cached, bytes, and a hybrid cache's groups.
class CacheSeen {
public:
    explicit CacheSeen(RecordingStats& s)
        : s_(s) {}

    bool add(const events::EngineEvent& event) {
        switch (event.kind) {
        case EventKind::group_blocks: {
            const auto group = events::as<events::GroupBlocks>(event);
            if (RecordingStats::KvGroupStats* g = group_of(group.group)) {
                g->window = group.window;
                g->peak_used_blocks = std::max(g->peak_used_blocks, group.used_blocks);
                g->mean_used_blocks +=
                    static_cast<double>(group.used_blocks); // a sum until finish()
                ++g->samples;
            }
            return true;
        }
        case EventKind::block_freed:
        case EventKind::block_unshared: {
            const bool freed = event.kind == EventKind::block_freed;
            const bool left = freed ? events::as<events::BlockFreed>(event).left_window
                                    : events::as<events::BlockUnshared>(event).left_window;
            const std::int32_t group = freed ? events::as<events::BlockFreed>(event).group
                                             : events::as<events::BlockUnshared>(event).group;
            if (RecordingStats::KvGroupStats* g = left ? group_of(group) : nullptr) {
                ++g->blocks_left_window;
            }
            return true;
        }
        case EventKind::memory_sample: {
            const auto memory = events::as<events::MemorySample>(event);
            s_.peak_used_blocks = std::max(s_.peak_used_blocks, memory.used_blocks);
            s_.total_blocks = memory.total_blocks;
            used_sum_ += static_cast<double>(memory.used_blocks);
            cached_sum_ += static_cast<double>(memory.cached_blocks);
            ++samples_;
            return true;
        }
        case EventKind::kv_bytes: {
            auto bytes = events::as<events::KvBytes>(event);
            s_.kv_bytes_used_peak = std::max(s_.kv_bytes_used_peak, bytes.used_bytes);
            s_.kv_bytes_per_block = bytes.bytes_per_block;
            if (s_.kv_formats.empty()) {
                s_.kv_formats = std::move(bytes.formats);
            }
            return true;
        }
        default:
            return false;
        }
    }

    void finish() {
        for (RecordingStats::KvGroupStats& g : s_.kv_groups) {
            g.mean_used_blocks =
                g.samples > 0 ? g.mean_used_blocks / static_cast<double>(g.samples) : 0;
        }
        if (samples_ > 0) {
            s_.mean_used_blocks = used_sum_ / static_cast<double>(samples_);
            s_.mean_cached_blocks = cached_sum_ / static_cast<double>(samples_);
        }
    }

private:
    // Group `group`'s stats; null for a damaged row (no group has that number).
    RecordingStats::KvGroupStats* group_of(std::int32_t group) {
        if (group < 0 || group > 4096) {
            return nullptr;
        }
        if (s_.kv_groups.size() <= static_cast<std::size_t>(group)) {
            s_.kv_groups.resize(static_cast<std::size_t>(group) + 1);
        }
        return &s_.kv_groups[static_cast<std::size_t>(group)];
    }

    RecordingStats& s_;
    double used_sum_ = 0;
    double cached_sum_ = 0;
    std::int64_t samples_ = 0;
};

// The offload tier: blocks written, read back and dropped, and what reading
// them back saved against computing them again.
class TierSeen {
public:
    explicit TierSeen(RecordingStats& s)
        : s_(s) {}

    bool add(const events::EngineEvent& event) {
        switch (event.kind) {
        case EventKind::block_offloaded: {
            const auto moved = events::as<events::BlockOffloaded>(event);
            ++s_.tier.offloaded;
            s_.tier.bytes_written += moved.bytes;
            s_.tier.write_ms += static_cast<double>(moved.nanoseconds) * 1e-6;
            return true;
        }
        case EventKind::block_reloaded: {
            const auto moved = events::as<events::BlockReloaded>(event);
            ++s_.tier.reloaded;
            s_.tier.loaded_tokens += s_.block_size; // the run_config came first
            s_.tier.bytes_read += moved.bytes;
            s_.tier.read_ms += static_cast<double>(moved.nanoseconds) * 1e-6;
            return true;
        }
        case EventKind::tier_dropped:
            ++s_.tier.dropped;
            return true;
        default:
            return false;
        }
    }

    void finish(const StepsSeen& steps) {
        if (steps.prefill_ms_per_token() > 0) {
            s_.tier.prefill_ms_per_token = steps.prefill_ms_per_token();
            s_.tier.recompute_ms_estimate =
                s_.tier.prefill_ms_per_token * static_cast<double>(s_.tier.loaded_tokens);
        }
    }

private:
    RecordingStats& s_;
};

// The run's settings and its speculative decoding.
class RunSeen {
public:
    explicit RunSeen(RecordingStats& s)
        : s_(s) {}

    bool add(const events::EngineEvent& event) {
        switch (event.kind) {
        case EventKind::run_config: {
            auto config = events::as<events::RunConfig>(event);
            s_.block_size = config.block_size;
            if (s_.run_config.empty()) { // a recording without the metadata row
                s_.run_config = std::move(config.settings);
            }
            return true;
        }
        case EventKind::draft_verified: {
            const auto verified = events::as<events::DraftVerified>(event);
            s_.speculation.add(verified.drafted, verified.accepted, 1);
            s_.speculation.blocks_released += verified.blocks_released;
            return true;
        }
        default:
            return false;
        }
    }

private:
    RecordingStats& s_;
};

// Attached engines: what each stored and removed, peaks per tier, metrics.
class AttachedSeen {
public:
    explicit AttachedSeen(RecordingStats& s)
        : s_(s) {}

    bool add(const events::EngineEvent& event) {
        if (!attached_.apply(event)) {
            return false;
        }
        if (event.kind == EventKind::attached_block_stored) {
            const auto row = events::as<events::AttachedBlockStored>(event);
            const attach::AttachedState::Source* source = attached_.source(row.source);
            for (const auto& [key, tier] : source->blocks.tiers()) {
                std::int64_t& peak = peak_resident_[{row.source, key}];
                peak = std::max(peak, static_cast<std::int64_t>(tier.blocks.size()));
            }
        } else if (event.kind == EventKind::attached_metric) {
            ++metric_samples_[events::as<events::AttachedMetric>(event).source];
        }
        return true;
    }

    void finish() {
        for (const auto& [id, source] : attached_.sources()) {
            AttachedSourceStats a;
            a.source = id;
            const auto endpoints = nlohmann::json::parse(source.info.endpoints, nullptr, false);
            if (endpoints.is_object() &&
                endpoints.value("endpoint", nlohmann::json()).is_string()) {
                a.endpoint = endpoints["endpoint"].get<std::string>();
            }
            const attach::ResidencyCounts& c = source.blocks.counts();
            a.blocks_stored = c.stored;
            a.blocks_removed = c.removed;
            a.removed_not_resident = c.unknown_removed;
            a.clears = c.clears;
            a.restarts = c.resets;
            a.events = source.status.events;
            a.lost = source.status.lost;
            a.bad_rows = source.bad_rows;
            a.capacity_blocks = source.capacity_blocks();
            a.metrics = attach::summarize_metrics(source.metrics);
            a.metric_samples = metric_samples_[id];
            for (const auto& [key, peak] : peak_resident_) {
                if (key.first != id) {
                    continue;
                }
                const auto* tier = source.blocks.tier(key.second);
                a.tiers.push_back(
                    {key.second.rank, key.second.medium,
                     tier != nullptr ? static_cast<std::int64_t>(tier->blocks.size()) : 0, peak});
            }
            s_.attached.push_back(std::move(a));
        }
    }

private:
    RecordingStats& s_;
    attach::AttachedState attached_;
    std::map<std::pair<std::int64_t, attach::TierKey>, std::int64_t> peak_resident_;
    std::map<std::int64_t, std::int64_t> metric_samples_; // per attached source
};

} // namespace

Distribution Distribution::of(std::vector<double> samples) {
    Distribution d;
    d.count = static_cast<std::int64_t>(samples.size());
    if (samples.empty()) {
        return d;
    }
    std::sort(samples.begin(), samples.end());
    d.mean =
        std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
    d.p50 = at(samples, 0.5);
    d.p90 = at(samples, 0.9);
    d.p99 = at(samples, 0.99);
    d.max = samples.back();
    return d;
}

std::int64_t RecordingStats::kv_bytes_written() const {
    // A hybrid cache's block holds one group's layers; a token is in each group.
    const auto groups = static_cast<std::int64_t>(std::max<std::size_t>(1, kv_groups.size()));
    return block_size > 0 ? computed_tokens() * kv_bytes_per_block * groups / block_size : 0;
}

std::int64_t RecordingStats::kv_bytes_read() const {
    // Entries read are the layers' average, so every layer's bytes an entry.
    const auto groups = static_cast<std::int64_t>(std::max<std::size_t>(1, kv_groups.size()));
    return block_size > 0 ? costs.kv_entries_read * kv_bytes_per_block * groups / block_size : 0;
}

std::int64_t RecordingStats::plain_cache_peak_bytes() const {
    // Every whole-context group holds each running sequence's blocks at
    // every step, so their peak is what a plain cache keeps per block of
    // layers.
    std::int64_t global_peak = 0;
    for (const KvGroupStats& group : kv_groups) {
        if (group.window == 0 && group.samples > 0) {
            global_peak = std::max(global_peak, group.peak_used_blocks);
        }
    }
    return static_cast<std::int64_t>(static_cast<double>(global_peak) *
                                         plain_cache_scale(run_config) *
                                         static_cast<double>(kv_bytes_per_block) +
                                     0.5);
}

RecordingStats compute_stats(const std::filesystem::path& path) {
    const ReadOnlyRecording recording(path);
    RecordingStats s;
    s.path = path.string();
    {
        Statement meta(recording.db(), "SELECT value FROM KVSCOPE_META WHERE key = 'run_config'");
        if (meta.next() && !meta.is_null(0)) {
            s.run_config = meta.text(0);
        }
    }
    {
        Statement meta(recording.db(),
                       "SELECT value FROM KVSCOPE_META WHERE key = 'steps_in_turns'");
        s.steps_in_turns = meta.next() && !meta.is_null(0) && meta.text(0) == "yes";
    }

    // Each event goes to the first accumulator that takes it.
    AttachedSeen attached(s);
    StepsSeen steps(s);
    RequestsSeen requests(s);
    CacheSeen cache(s);
    TierSeen tier(s);
    RunSeen run(s);
    std::int64_t first_t = -1;
    std::int64_t last_t = -1;
    EventRows rows(recording.db(), path.string());
    events::EngineEvent event;
    while (rows.next(event)) {
        first_t = first_t < 0 ? event.time_ns : first_t;
        last_t = event.time_ns;
        if (!attached.add(event) && !steps.add(event) && !requests.add(event) &&
            !cache.add(event) && !tier.add(event)) {
            run.add(event);
        }
    }
    s.events = rows.rows_read();
    s.times = summarise_time_by_name(recording.db());
    s.duration_s = first_t >= 0 ? static_cast<double>(last_t - first_t) * 1e-9 : 0;
    steps.finish();
    requests.finish();
    cache.finish();
    tier.finish(steps);
    attached.finish();
    return s;
}

} // namespace kvscope::profiler
