// `kvscope stats FILE`: what a recording says, in the manner of nsys stats:
// steps, requests (time to first token, time per output token), the prefix
// cache, block occupancy, preemption and eviction. --json for machines.
#include "app/cli/command.h"
#include "profiler/recording_stats.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

namespace kvscope::cli {
namespace {

nlohmann::json to_json(const profiler::Distribution& d) {
    return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50},
            {"p90", d.p90},     {"p99", d.p99},   {"max", d.max}};
}

void print_distribution(const char* name, const profiler::Distribution& d) {
    std::printf("  %-28s %8lld %10.2f %10.2f %10.2f %10.2f %10.2f\n", name,
                static_cast<long long>(d.count), d.mean, d.p50, d.p90, d.p99, d.max);
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
            {"total_blocks", s.total_blocks},
            {"peak_used_blocks", s.peak_used_blocks},
            {"mean_used_blocks", s.mean_used_blocks},
            {"mean_cached_blocks", s.mean_cached_blocks},
        };
        if (!s.run_config.empty()) {
            out["run_config"] = nlohmann::json::parse(s.run_config, nullptr, false);
        }
        std::cout << out.dump(2) << "\n";
        return exit_ok;
    }
    std::printf("%s: %lld events over %.2f s\n", s.path.c_str(), static_cast<long long>(s.events),
                s.duration_s);
    if (!s.run_config.empty()) {
        std::printf("run: %s\n", s.run_config.c_str());
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
    std::printf("preemptions   %lld; tokens evicted %lld\n", static_cast<long long>(s.preemptions),
                static_cast<long long>(s.evicted_tokens));
    return exit_ok;
}

} // namespace

Command add_stats_command(CLI::App& app) {
    auto path = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    CLI::App* parser = app.add_subcommand(
        "stats", "Summarise a recording: step times, TTFT and TPOT percentiles, prefix hit rate, "
                 "block occupancy, preemptions");
    parser->add_option("recording", *path, "A recording made by kvscope record")->required();
    parser->add_flag("--json", *json, "Print the summary as JSON");
    return {parser, [path, json] {
                return run_stats(*path, *json);
            }};
}

} // namespace kvscope::cli
