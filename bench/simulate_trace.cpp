// kvscope-bench-simulate: how fast `kvscope simulate` replays a production
// trace, against issue 16's targets: the whole Mooncake conversation trace at
// one capacity in at most 10 s, a 10-point capacity sweep in at most a
// minute, and memory bounded by the cache, not the trace's length (peak RSS
// after the first quarter of the trace and after all of it).
//
//   kvscope-bench-simulate [--trace ../shared/traces/conversation_trace.jsonl]
//                          [--capacity 100000] [--no-sweep]
#include "engine/sim/hash_id_trace.h"
#include "engine/sim/simulator.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <sys/resource.h>
#include <thread>

using namespace kvscope;

namespace {

double peak_rss_mib() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_maxrss) / 1024.0; // KiB on Linux
}

sim::SimulationConfig config_for(int blocks, std::int64_t max_requests) {
    sim::SimulationConfig config;
    config.block_size = 16;
    config.num_blocks = blocks;
    config.bytes_per_block = 16 * 131'072; // kvscope simulate's default model
    config.scheduler.max_num_seqs = 256;   // kvscope simulate's defaults (vLLM's)
    config.scheduler.max_num_batched_tokens = 8192;
    config.max_requests = max_requests;
    // The cost model changes timing, not the work replayed: kvscope
    // simulate's default.
    config.cost = sim::CostModel::llama3_8b_h100_estimate();
    return config;
}

} // namespace

int main(int argc, char** argv) {
    std::string trace_path = "../shared/traces/conversation_trace.jsonl";
    int capacity = 100'000;
    bool no_sweep = false;
    CLI::App cli{"kvscope-bench-simulate: trace replay speed"};
    cli.add_option("--trace", trace_path, "A Mooncake trace")->check(CLI::ExistingFile);
    cli.add_option("--capacity", capacity, "KV capacity in blocks (the sweep halves down from it)");
    cli.add_flag("--no-sweep", no_sweep, "Skip the 10-point sweep");
    CLI11_PARSE(cli, argc, argv);

    const auto seconds_of = [](auto&& run) {
        const auto start = std::chrono::steady_clock::now();
        run();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    sim::SimulationResult quarter;
    const double quarter_s = seconds_of([&] {
        sim::HashIdTrace trace(trace_path, sim::kMooncakeFormat);
        quarter = sim::simulate(trace, config_for(capacity, 3000));
    });
    const double rss_quarter = peak_rss_mib();
    sim::SimulationResult whole;
    const double whole_s = seconds_of([&] {
        sim::HashIdTrace trace(trace_path, sim::kMooncakeFormat);
        whole = sim::simulate(trace, config_for(capacity, 0));
    });
    const double rss_whole = peak_rss_mib();
    double sweep_s = 0;
    if (!no_sweep) {
        std::vector<sim::SimulationConfig> configs;
        for (int k = 9; k >= 0; --k) {
            configs.push_back(config_for(std::max(1, capacity >> k), 0));
        }
        sweep_s = seconds_of([&] {
            sim::simulate_each(
                [&] { return sim::open_trace(trace_path, sim::TraceFormat::mooncake); }, configs);
        });
    }

    std::printf("| what | target | measured |\n| --- | ---: | ---: |\n");
    std::printf("| trace | | %s: %lld requests, %lld prompt tokens, "
                "%.0f s on the simulated clock |\n",
                trace_path.c_str(), static_cast<long long>(whole.requests),
                static_cast<long long>(whole.prompt_tokens), whole.simulated_s);
    std::printf("| capacity | | %d blocks of 16 tokens; hit ratio by tokens %.2f%%, %lld steps |\n",
                capacity, 100 * whole.hit_ratio_tokens(), static_cast<long long>(whole.steps));
    std::printf("| whole trace at one capacity (s) | 10 | %.1f |\n", whole_s);
    std::printf("| first 3,000 requests (s) | | %.1f |\n", quarter_s);
    if (!no_sweep) {
        std::printf("| 10-point sweep, %u threads (s) | 60 | %.1f |\n",
                    std::max(1u, std::thread::hardware_concurrency()), sweep_s);
    }
    std::printf("| peak RSS after 3,000 requests / the whole trace (MiB) | flat | %.0f / %.0f |\n",
                rss_quarter, rss_whole);
    return 0;
}
