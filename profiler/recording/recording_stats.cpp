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

    std::map<std::int64_t, RequestTimes> requests;
    std::map<std::int64_t, std::int64_t> step_begin; // step index -> t_ns
    std::int64_t& block_size = s.block_size;
    bool every_step_counted = true;
    double prefill_only_ms = 0; // steps that ran prompt tokens almost only
    std::int64_t prefill_only_tokens = 0;
    std::int64_t first_t = -1;
    std::int64_t last_t = -1;
    double used_sum = 0;
    double cached_sum = 0;
    std::int64_t samples = 0;
    attach::AttachedState attached;
    std::map<std::pair<std::int64_t, attach::TierKey>, std::int64_t> peak_resident;
    std::map<std::int64_t, std::int64_t> metric_samples; // per attached source
    EventRows rows(recording.db(), path.string());
    events::EngineEvent event;
    while (rows.next(event)) {
        const std::int64_t t = event.time_ns;
        first_t = first_t < 0 ? t : first_t;
        last_t = t;
        if (attached.apply(event)) {
            if (event.kind == EventKind::attached_block_stored) {
                const auto row = events::as<events::AttachedBlockStored>(event);
                const attach::AttachedState::Source* source = attached.source(row.source);
                for (const auto& [key, tier] : source->blocks.tiers()) {
                    std::int64_t& peak = peak_resident[{row.source, key}];
                    peak = std::max(peak, static_cast<std::int64_t>(tier.blocks.size()));
                }
            } else if (event.kind == EventKind::attached_metric) {
                ++metric_samples[events::as<events::AttachedMetric>(event).source];
            }
            continue;
        }
        switch (event.kind) {
        case EventKind::step_begin:
            step_begin[events::as<events::StepBegin>(event).step] = t;
            break;
        case EventKind::step_counters: {
            const auto cost = events::as<events::StepCounters>(event);
            const double cpu_ms = static_cast<double>(cost.cpu_ns) * 1e-6;
            ++s.costs.steps;
            s.costs.cpu_ms += cpu_ms;
            s.step_cpu_ms_samples.push_back(cpu_ms);
            s.costs.kv_entries_read += cost.kv_entries_read;
            every_step_counted = every_step_counted && cost.instructions >= 0 && cost.cycles >= 0;
            if (every_step_counted) {
                s.costs.instructions =
                    std::max<std::int64_t>(0, s.costs.instructions) + cost.instructions;
                s.costs.cycles = std::max<std::int64_t>(0, s.costs.cycles) + cost.cycles;
            }
            break;
        }
        case EventKind::step_end: {
            const auto end = events::as<events::StepEnd>(event);
            if (const auto it = step_begin.find(end.step); it != step_begin.end()) {
                const double ms = static_cast<double>(t - it->second) * 1e-6;
                s.step_ms_samples.push_back(ms);
                // A step that computed a whole prompt also sampled its
                // first token: steps nine tenths prompt or more count.
                if (end.prefill_tokens > 0 && end.prefill_tokens >= 9 * end.decode_tokens) {
                    prefill_only_ms += ms;
                    prefill_only_tokens += end.prefill_tokens + end.decode_tokens;
                }
            }
            ++s.steps;
            s.step_tokens.push_back(end.prefill_tokens + end.decode_tokens);
            s.prefill_tokens += end.prefill_tokens;
            s.decode_tokens += end.decode_tokens;
            break;
        }
        case EventKind::request_arrived:
            requests[event.request].arrived = t;
            ++s.requests;
            break;
        case EventKind::prefix_lookup: {
            const auto lookup = events::as<events::PrefixLookup>(event);
            RequestTimes& r = requests[lookup.request];
            if (!r.looked_up) { // first admission only: re-admissions are not new hits
                r.looked_up = true;
                s.prefix_hit_tokens += lookup.hit_tokens;
                s.prompt_tokens += lookup.prompt_tokens;
            }
            break;
        }
        case EventKind::first_token:
            requests[event.request].first_token = t;
            break;
        case EventKind::request_finished: {
            const auto finished = events::as<events::RequestFinished>(event);
            RequestTimes& r = requests[finished.request];
            r.finished = t;
            r.generated = finished.generated_tokens;
            s.generated_tokens += finished.generated_tokens;
            ++s.finished;
            break;
        }
        case EventKind::request_aborted:
            ++s.aborted;
            break;
        case EventKind::request_rejected:
            ++s.rejected;
            break;
        case EventKind::request_preempted:
            ++s.preemptions;
            break;
        case EventKind::tokens_evicted:
            s.evicted_tokens += events::as<events::TokensEvicted>(event).tokens;
            break;
        case EventKind::block_offloaded: {
            const auto moved = events::as<events::BlockOffloaded>(event);
            ++s.tier.offloaded;
            s.tier.bytes_written += moved.bytes;
            s.tier.write_ms += static_cast<double>(moved.nanoseconds) * 1e-6;
            break;
        }
        case EventKind::tier_dropped:
            ++s.tier.dropped;
            break;
        case EventKind::run_config: {
            auto config = events::as<events::RunConfig>(event);
            block_size = config.block_size;
            if (s.run_config.empty()) { // a recording without the metadata row
                s.run_config = std::move(config.settings);
            }
            break;
        }
        case EventKind::block_reloaded: {
            const auto moved = events::as<events::BlockReloaded>(event);
            ++s.tier.reloaded;
            s.tier.loaded_tokens += block_size;
            s.tier.bytes_read += moved.bytes;
            s.tier.read_ms += static_cast<double>(moved.nanoseconds) * 1e-6;
            break;
        }
        case EventKind::draft_verified: {
            const auto verified = events::as<events::DraftVerified>(event);
            s.speculation.add(verified.drafted, verified.accepted, 1);
            s.speculation.blocks_released += verified.blocks_released;
            break;
        }
        case EventKind::group_blocks: {
            const auto group = events::as<events::GroupBlocks>(event);
            if (group.group < 0 || group.group > 4096) {
                break; // a damaged row: no group has that number
            }
            if (s.kv_groups.size() <= static_cast<std::size_t>(group.group)) {
                s.kv_groups.resize(static_cast<std::size_t>(group.group) + 1);
            }
            RecordingStats::KvGroupStats& g = s.kv_groups[static_cast<std::size_t>(group.group)];
            g.window = group.window;
            g.peak_used_blocks = std::max(g.peak_used_blocks, group.used_blocks);
            g.mean_used_blocks += static_cast<double>(group.used_blocks); // a sum until the end
            ++g.samples;
            break;
        }
        case EventKind::block_freed:
        case EventKind::block_unshared: {
            const bool left = event.kind == EventKind::block_freed
                                  ? events::as<events::BlockFreed>(event).left_window
                                  : events::as<events::BlockUnshared>(event).left_window;
            const std::int32_t group = event.kind == EventKind::block_freed
                                           ? events::as<events::BlockFreed>(event).group
                                           : events::as<events::BlockUnshared>(event).group;
            if (left && group >= 0 && group <= 4096) {
                if (s.kv_groups.size() <= static_cast<std::size_t>(group)) {
                    s.kv_groups.resize(static_cast<std::size_t>(group) + 1);
                }
                ++s.kv_groups[static_cast<std::size_t>(group)].blocks_left_window;
            }
            break;
        }
        case EventKind::memory_sample: {
            const auto memory = events::as<events::MemorySample>(event);
            s.peak_used_blocks = std::max(s.peak_used_blocks, memory.used_blocks);
            s.total_blocks = memory.total_blocks;
            used_sum += static_cast<double>(memory.used_blocks);
            cached_sum += static_cast<double>(memory.cached_blocks);
            ++samples;
            break;
        }
        case EventKind::kv_bytes: {
            auto bytes = events::as<events::KvBytes>(event);
            s.kv_bytes_used_peak = std::max(s.kv_bytes_used_peak, bytes.used_bytes);
            s.kv_bytes_per_block = bytes.bytes_per_block;
            if (s.kv_formats.empty()) {
                s.kv_formats = std::move(bytes.formats);
            }
            break;
        }
        default:
            break;
        }
    }
    if (!every_step_counted) {
        s.costs.instructions = -1;
        s.costs.cycles = -1;
    }
    s.events = rows.rows_read();
    s.times = summarise_time_by_name(recording.db());
    for (RecordingStats::KvGroupStats& g : s.kv_groups) {
        g.mean_used_blocks =
            g.samples > 0 ? g.mean_used_blocks / static_cast<double>(g.samples) : 0;
    }

    for (const auto& [id, r] : requests) {
        if (r.arrived >= 0 && r.first_token >= 0) {
            s.ttft_ms_samples.push_back(static_cast<double>(r.first_token - r.arrived) * 1e-6);
        }
        if (r.first_token >= 0 && r.finished >= 0 && r.generated > 1) {
            s.tpot_ms_samples.push_back(static_cast<double>(r.finished - r.first_token) * 1e-6 /
                                        static_cast<double>(r.generated - 1));
        }
    }
    s.step_ms = Distribution::of(s.step_ms_samples);
    s.ttft_ms = Distribution::of(s.ttft_ms_samples);
    s.tpot_ms = Distribution::of(s.tpot_ms_samples);
    s.duration_s = first_t >= 0 ? static_cast<double>(last_t - first_t) * 1e-9 : 0;
    if (prefill_only_tokens > 0) {
        s.tier.prefill_ms_per_token = prefill_only_ms / static_cast<double>(prefill_only_tokens);
        s.tier.recompute_ms_estimate =
            s.tier.prefill_ms_per_token * static_cast<double>(s.tier.loaded_tokens);
    }
    s.prefix_hit_rate = s.prompt_tokens > 0 ? static_cast<double>(s.prefix_hit_tokens) /
                                                  static_cast<double>(s.prompt_tokens)
                                            : 0;
    for (const auto& [id, source] : attached.sources()) {
        AttachedSourceStats a;
        a.source = id;
        const auto endpoints = nlohmann::json::parse(source.info.endpoints, nullptr, false);
        if (endpoints.is_object() && endpoints.value("endpoint", nlohmann::json()).is_string()) {
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
        a.metric_samples = metric_samples[id];
        for (const auto& [key, peak] : peak_resident) {
            if (key.first != id) {
                continue;
            }
            const auto* tier = source.blocks.tier(key.second);
            a.tiers.push_back({key.second.rank, key.second.medium,
                               tier != nullptr ? static_cast<std::int64_t>(tier->blocks.size()) : 0,
                               peak});
        }
        s.attached.push_back(std::move(a));
    }
    if (samples > 0) {
        s.mean_used_blocks = used_sum / static_cast<double>(samples);
        s.mean_cached_blocks = cached_sum / static_cast<double>(samples);
    }
    return s;
}

} // namespace kvscope::profiler
