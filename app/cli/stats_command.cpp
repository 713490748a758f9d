// `kvscope stats FILE`: what a recording says, in the manner of nsys stats:
// steps, requests (time to first token, time per output token), the prefix
// cache, block occupancy, preemption and eviction, and time by name of CPU
// ops, GPU kernels, copies and NVTX ranges. --json for machines.
#include "app/cli/command.h"
#include "engine/kv/kv_groups.h"
#include "engine/util/json_text.h"
#include "profiler/recorded_attach.h"
#include "profiler/recording/recording_stats.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

namespace kvscope::cli {
namespace {

nlohmann::json to_json(const profiler::Distribution& d) {
    return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50},
            {"p90", d.p90},     {"p99", d.p99},   {"max", d.max}};
}

nlohmann::json to_json(const std::vector<profiler::NamedDurations>& rows) {
    nlohmann::json out = nlohmann::json::array();
    for (const profiler::NamedDurations& d : rows) {
        out.push_back({{"name", d.name},
                       {"instances", d.instances},
                       {"total_ns", d.total_ns},
                       {"percent", d.percent},
                       {"mean_ns", d.mean_ns},
                       {"median_ns", d.median_ns},
                       {"min_ns", d.min_ns},
                       {"max_ns", d.max_ns},
                       {"stddev_ns", d.stddev_ns}});
    }
    return out;
}

// One table in the layout of nsys stats' summaries, durations in microseconds.
void print_time_by_name(const char* title, const std::vector<profiler::NamedDurations>& rows) {
    if (rows.empty()) {
        return;
    }
    std::printf("\n%s\n  %7s %11s %9s %10s %10s %10s %10s %10s  %s\n", title, "time %",
                "total (ms)", "instances", "avg (us)", "med (us)", "min (us)", "max (us)", "stddev",
                "name");
    for (const profiler::NamedDurations& d : rows) {
        std::printf("  %7.1f %11.3f %9lld %10.1f %10.1f %10.1f %10.1f %10.1f  %s\n", d.percent,
                    static_cast<double>(d.total_ns) * 1e-6, static_cast<long long>(d.instances),
                    d.mean_ns * 1e-3, d.median_ns * 1e-3, static_cast<double>(d.min_ns) * 1e-3,
                    static_cast<double>(d.max_ns) * 1e-3, d.stddev_ns * 1e-3, d.name.c_str());
    }
}

void print_distribution(const char* name, const profiler::Distribution& d) {
    std::printf("  %-28s %8lld %10.2f %10.2f %10.2f %10.2f %10.2f\n", name,
                static_cast<long long>(d.count), d.mean, d.p50, d.p90, d.p99, d.max);
}

nlohmann::json attached_json(const std::vector<profiler::AttachedSourceStats>& sources) {
    nlohmann::json out = nlohmann::json::array();
    for (const profiler::AttachedSourceStats& a : sources) {
        nlohmann::json tiers = nlohmann::json::array();
        for (const profiler::AttachedTierStats& t : a.tiers) {
            tiers.push_back({{"rank", t.rank},
                             {"medium", t.medium},
                             {"resident_blocks", t.resident_blocks},
                             {"peak_resident_blocks", t.peak_resident_blocks}});
        }
        out.push_back({{"source", a.source},
                       {"endpoint", a.endpoint},
                       {"blocks_stored", a.blocks_stored},
                       {"blocks_removed", a.blocks_removed},
                       {"removed_not_resident", a.removed_not_resident},
                       {"clears", a.clears},
                       {"restarts", a.restarts},
                       {"events", a.events},
                       {"lost", a.lost},
                       {"bad_rows", a.bad_rows},
                       {"capacity_blocks", a.capacity_blocks},
                       {"metric_samples", a.metric_samples},
                       {"metrics", profiler::metrics_summary_json(a.metrics)},
                       {"tiers", tiers}});
    }
    return out;
}

// Attached engines: what their KV events said, per source and cache tier.
void print_attached(const std::vector<profiler::AttachedSourceStats>& sources) {
    for (const profiler::AttachedSourceStats& a : sources) {
        std::printf("\nattached source %lld  %s\n  %lld events received, %lld batches lost; "
                    "blocks stored %lld, removed %lld (%lld not resident), cleared %lld, "
                    "publisher restarts %lld\n",
                    static_cast<long long>(a.source), a.endpoint.c_str(),
                    static_cast<long long>(a.events), static_cast<long long>(a.lost),
                    static_cast<long long>(a.blocks_stored),
                    static_cast<long long>(a.blocks_removed),
                    static_cast<long long>(a.removed_not_resident),
                    static_cast<long long>(a.clears), static_cast<long long>(a.restarts));
        if (a.metric_samples > 0) {
            const attach::MetricsSummary& m = a.metrics;
            std::printf("  engine metrics (%lld samples), last polled:",
                        static_cast<long long>(a.metric_samples));
            if (m.kv_usage) {
                std::printf(" KV usage %.1f%%", 100.0 * *m.kv_usage);
            }
            if (m.prefix_hit_rate) {
                std::printf(", prefix cache hit rate %.1f%%", 100.0 * *m.prefix_hit_rate);
            }
            if (m.prefix_hit_rate_since) {
                std::printf(" (%.1f%% while attached)", 100.0 * *m.prefix_hit_rate_since);
            }
            if (m.preemptions) {
                std::printf(", %.0f preemptions", *m.preemptions);
            }
            if (m.num_gpu_blocks) {
                std::printf(", capacity %lld blocks", static_cast<long long>(*m.num_gpu_blocks));
            }
            std::printf("\n");
        }
        for (const profiler::AttachedTierStats& t : a.tiers) {
            std::printf("  rank %lld %-8s %lld blocks resident at the end, peak %lld",
                        static_cast<long long>(t.rank), t.medium.c_str(),
                        static_cast<long long>(t.resident_blocks),
                        static_cast<long long>(t.peak_resident_blocks));
            if (a.capacity_blocks > 0) {
                std::printf(" of %lld (%.1f%%)", static_cast<long long>(a.capacity_blocks),
                            100.0 * static_cast<double>(t.peak_resident_blocks) /
                                static_cast<double>(a.capacity_blocks));
            }
            std::printf("\n");
        }
        if (a.bad_rows > 0) {
            std::printf("  warning: %lld rows could not be read back\n",
                        static_cast<long long>(a.bad_rows));
        }
    }
}

// A counter's total, or null where any step went uncounted.
nlohmann::json counted(std::int64_t total) {
    return total >= 0 ? nlohmann::json(total) : nlohmann::json(nullptr);
}

nlohmann::json kv_groups_json(const profiler::RecordingStats& s) {
    nlohmann::json groups = nlohmann::json::array();
    for (const profiler::RecordingStats::KvGroupStats& g : s.kv_groups) {
        groups.push_back({{"window", g.window},
                          {"peak_used_blocks", g.peak_used_blocks},
                          {"mean_used_blocks", g.mean_used_blocks},
                          {"blocks_left_window", g.blocks_left_window}});
    }
    return groups;
}

nlohmann::json costs_json(const profiler::RecordingStats& s) {
    if (s.costs.steps == 0) {
        return nullptr; // recorded before steps carried their costs
    }
    return {{"steps", s.costs.steps},
            {"cpu_ms", s.costs.cpu_ms},
            {"instructions", counted(s.costs.instructions)},
            {"cycles", counted(s.costs.cycles)},
            {"kv_entries_read", s.costs.kv_entries_read},
            {"kv_bytes_written", s.kv_bytes_written()},
            {"kv_bytes_read", s.kv_bytes_read()}};
}

// What the steps cost the engine's thread, and the cache traffic the
// workload alone decides: the figures a regression gate judges.
void print_costs(const profiler::RecordingStats& s) {
    if (s.costs.steps == 0) {
        return; // recorded before steps carried their costs
    }
    double wall_ms = 0;
    for (const double ms : s.step_ms_samples) {
        wall_ms += ms;
    }
    std::printf("engine CPU    %.1f ms over %lld steps", s.costs.cpu_ms,
                static_cast<long long>(s.costs.steps));
    if (wall_ms > 0) {
        std::printf(" (%.0f%% of their %.1f ms of wall time)", 100 * s.costs.cpu_ms / wall_ms,
                    wall_ms);
    }
    std::printf("\n");
    if (s.costs.instructions >= 0 && s.costs.cycles >= 0) {
        std::printf("counters      %lld instructions, %lld cycles (%.2f a cycle)\n",
                    static_cast<long long>(s.costs.instructions),
                    static_cast<long long>(s.costs.cycles),
                    s.costs.cycles > 0 ? static_cast<double>(s.costs.instructions) /
                                             static_cast<double>(s.costs.cycles)
                                       : 0.0);
    } else {
        std::printf("counters      not counted (no hardware counters where it was recorded, "
                    "or the kernel multiplexed them)\n");
    }
    if (s.block_size > 0) {
        std::printf("KV traffic    %.2f MiB written, %.2f MiB read by attention\n",
                    static_cast<double>(s.kv_bytes_written()) / (1024.0 * 1024.0),
                    static_cast<double>(s.kv_bytes_read()) / (1024.0 * 1024.0));
    }
}

int run_stats(const std::string& path, bool json) {
    const profiler::RecordingStats s = profiler::compute_stats(path);
    if (json) {
        nlohmann::json out{
            {"path", s.path},
            {"events", s.events},
            {"duration_s", s.duration_s},
            {"steps", s.steps},
            {"step_ms", to_json(s.step_ms)},
            {"prefill_tokens", s.prefill_tokens},
            {"decode_tokens", s.decode_tokens},
            {"requests", s.requests},
            {"finished", s.finished},
            {"aborted", s.aborted},
            {"rejected", s.rejected},
            {"ttft_ms", to_json(s.ttft_ms)},
            {"tpot_ms", to_json(s.tpot_ms)},
            {"generated_tokens", s.generated_tokens},
            {"prompt_tokens", s.prompt_tokens},
            {"prefix_hit_tokens", s.prefix_hit_tokens},
            {"prefix_hit_rate", s.prefix_hit_rate},
            {"preemptions", s.preemptions},
            {"evicted_tokens", s.evicted_tokens},
            {"speculation",
             {{"drafted_tokens", s.speculation.drafted},
              {"accepted_tokens", s.speculation.accepted},
              {"verifies", s.speculation.verifies},
              {"acceptance_rate", s.speculation.acceptance_rate()},
              {"tokens_per_verify", s.speculation.tokens_per_verify()},
              {"rollback_blocks_released", s.speculation.blocks_released}}},
            {"offload_tier",
             {{"blocks_offloaded", s.tier.offloaded},
              {"blocks_reloaded", s.tier.reloaded},
              {"blocks_dropped", s.tier.dropped},
              {"bytes_written", s.tier.bytes_written},
              {"bytes_read", s.tier.bytes_read},
              {"write_ms", s.tier.write_ms},
              {"read_ms", s.tier.read_ms},
              {"loaded_tokens", s.tier.loaded_tokens},
              {"prefill_ms_per_token", s.tier.prefill_ms_per_token},
              {"recompute_ms_estimate", s.tier.recompute_ms_estimate}}},
            {"total_blocks", s.total_blocks},
            {"peak_used_blocks", s.peak_used_blocks},
            {"mean_used_blocks", s.mean_used_blocks},
            {"mean_cached_blocks", s.mean_cached_blocks},
            {"kv_formats", s.kv_formats},
            {"kv_bytes_per_block", s.kv_bytes_per_block},
            {"kv_bytes_used_peak", s.kv_bytes_used_peak},
            {"kv_groups", kv_groups_json(s)},
            {"plain_cache_peak_bytes", s.plain_cache_peak_bytes()},
            {"costs", costs_json(s)},
            {"cpu_ops", to_json(s.times.cpu_ops)},
            {"gpu_kernels", to_json(s.times.gpu_kernels)},
            {"gpu_memory_ops", to_json(s.times.gpu_memory_ops)},
            {"nvtx_ranges", to_json(s.times.nvtx_ranges)},
            {"dropped_gpu_records", s.times.dropped_gpu_records},
            {"attached", attached_json(s.attached)},
        };
        if (!s.run_config.empty()) {
            out["run_config"] = nlohmann::json::parse(s.run_config, nullptr, false);
        }
        std::cout << json_text(out, 2) << "\n";
        return exit_ok;
    }
    std::printf("%s: %lld events over %.2f s\n", s.path.c_str(), static_cast<long long>(s.events),
                s.duration_s);
    if (!s.run_config.empty()) {
        std::printf("run: %s\n", s.run_config.c_str());
    }
    if (!s.attached.empty() && s.steps == 0 && s.requests == 0) {
        // An attached engine's recording: no steps or requests of ours to report.
        print_attached(s.attached);
        return exit_ok;
    }
    std::printf("\n  %-28s %8s %10s %10s %10s %10s %10s\n", "", "count", "mean", "p50", "p90",
                "p99", "max");
    print_distribution("step time (ms)", s.step_ms);
    print_distribution("time to first token (ms)", s.ttft_ms);
    print_distribution("time per output token (ms)", s.tpot_ms);
    std::printf("\nrequests      %lld: %lld finished, %lld aborted, %lld rejected; %lld tokens "
                "generated\n",
                static_cast<long long>(s.requests), static_cast<long long>(s.finished),
                static_cast<long long>(s.aborted), static_cast<long long>(s.rejected),
                static_cast<long long>(s.generated_tokens));
    std::printf("steps         %lld: %lld prefill tokens, %lld decode tokens\n",
                static_cast<long long>(s.steps), static_cast<long long>(s.prefill_tokens),
                static_cast<long long>(s.decode_tokens));
    std::printf("prefix cache  %.1f%% of %lld prompt tokens hit (%lld)\n", 100 * s.prefix_hit_rate,
                static_cast<long long>(s.prompt_tokens),
                static_cast<long long>(s.prefix_hit_tokens));
    std::printf("KV blocks     peak %lld, mean %.1f used; mean %.1f cached; of %lld\n",
                static_cast<long long>(s.peak_used_blocks), s.mean_used_blocks,
                s.mean_cached_blocks, static_cast<long long>(s.total_blocks));
    if (s.kv_bytes_per_block > 0) {
        std::printf("KV bytes      %s: %.1f KiB a block, peak %.2f MiB in used blocks\n",
                    s.kv_formats.c_str(), static_cast<double>(s.kv_bytes_per_block) / 1024.0,
                    static_cast<double>(s.kv_bytes_used_peak) / (1024.0 * 1024.0));
    }
    for (std::size_t g = 0; g < s.kv_groups.size(); ++g) {
        const profiler::RecordingStats::KvGroupStats& group = s.kv_groups[g];
        std::printf("KV group %-4zu %s: peak %lld, mean %.1f blocks used", g,
                    kv::kv_group_kind(group.window).c_str(),
                    static_cast<long long>(group.peak_used_blocks), group.mean_used_blocks);
        if (group.window > 0) {
            std::printf("; %lld let go as the window moved",
                        static_cast<long long>(group.blocks_left_window));
        }
        std::printf("\n");
    }
    if (const std::int64_t plain = s.plain_cache_peak_bytes(); plain > 0) {
        std::printf("hybrid cache  peak %.2f MiB; a plain cache of this model, every layer keeping "
                    "what the global ones kept, would have held about %.2f MiB: %.0f%% of it\n",
                    static_cast<double>(s.kv_bytes_used_peak) / (1024.0 * 1024.0),
                    static_cast<double>(plain) / (1024.0 * 1024.0),
                    100.0 * static_cast<double>(s.kv_bytes_used_peak) / static_cast<double>(plain));
    }
    std::printf("preemptions   %lld; tokens evicted %lld\n", static_cast<long long>(s.preemptions),
                static_cast<long long>(s.evicted_tokens));
    print_costs(s);
    if (s.tier.offloaded + s.tier.reloaded > 0) {
        std::printf("offload tier  %lld blocks written (%.1f MiB, %.1f ms), %lld loaded back "
                    "(%.1f MiB, %.1f ms), %lld let go when full\n",
                    static_cast<long long>(s.tier.offloaded),
                    static_cast<double>(s.tier.bytes_written) / (1024.0 * 1024.0), s.tier.write_ms,
                    static_cast<long long>(s.tier.reloaded),
                    static_cast<double>(s.tier.bytes_read) / (1024.0 * 1024.0), s.tier.read_ms,
                    static_cast<long long>(s.tier.dropped));
        if (s.tier.loaded_tokens > 0 && s.tier.prefill_ms_per_token > 0) {
            std::printf(
                "              %lld prompt tokens loaded instead of computed: about %.0f ms "
                "of prefill at this run's %.2f ms a token, for %.1f ms of loading\n",
                static_cast<long long>(s.tier.loaded_tokens), s.tier.recompute_ms_estimate,
                s.tier.prefill_ms_per_token, s.tier.read_ms);
        }
    }
    if (s.speculation.verifies > 0) {
        const spec::SpeculationTotals& t = s.speculation;
        std::printf("speculation   %lld tokens drafted in %lld verifying passes, %lld kept "
                    "(%.1f%%): %.2f tokens a pass; rollbacks released %lld blocks\n",
                    static_cast<long long>(t.drafted), static_cast<long long>(t.verifies),
                    static_cast<long long>(t.accepted), 100 * t.acceptance_rate(),
                    t.tokens_per_verify(), static_cast<long long>(t.blocks_released));
    }
    print_time_by_name("CPU op time by name (all layers):", s.times.cpu_ops);
    print_time_by_name("GPU kernel time by name:", s.times.gpu_kernels);
    print_time_by_name("GPU copy and memset time:", s.times.gpu_memory_ops);
    print_time_by_name("NVTX ranges:", s.times.nvtx_ranges);
    if (s.times.dropped_gpu_records > 0) {
        std::printf("\nwarning: CUPTI dropped %lld GPU records (its buffers were full); the GPU "
                    "summaries above are missing them\n",
                    static_cast<long long>(s.times.dropped_gpu_records));
    }
    print_attached(s.attached);
    return exit_ok;
}

} // namespace

Command add_stats_command(CLI::App& app) {
    auto path = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    CLI::App* parser = app.add_subcommand(
        "stats", "Summarise a recording: step times, TTFT and TPOT percentiles, prefix hit rate, "
                 "block occupancy, preemptions, and time by name of CPU ops, GPU kernels and "
                 "NVTX ranges");
    parser->add_option("recording", *path, "A recording made by kvscope record")->required();
    parser->add_flag("--json", *json, "Print the summary as JSON");
    return {parser, [path, json] {
                return run_stats(*path, *json);
            }};
}

} // namespace kvscope::cli
