// `kvscope simulate TRACE`: replays a request trace (Mooncake's or Qwen-
// Bailian's production JSONL, or kvscope's own workload JSONL) through the engine's own KV manager
// and scheduler with a backend that computes nothing and a cost-model clock (engine/sim), and
// reports the prefix-cache hit ratio three ways, time to first token and per output token, queueing
// and preemptions. What a deployment with this much KV memory and this block size would see,
// without a GPU.
#include "app/cli/command.h"
#include "app/cli/model_option.h"
#include "app/cli/progress_line.h"
#include "app/cli/serving_options.h"
#include "app/cli/svg_to_png.h"
#include "app/cli/sweep_plot.h"
#include "engine/session/backend_factory.h"
#include "engine/session/model_loading.h"
#include "engine/sim/calibration.h"
#include "engine/sim/kvscope_trace.h"
#include "engine/sim/simulator.h"
#include "engine/util/json_text.h"
#include "profiler/recording/recorder.h"
#include "profiler/recording/run_metadata.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

namespace kvscope::cli {
namespace {

// The most blocks a capacity may name: the KV manager keeps ~100 bytes of
// bookkeeping a block, per replay (a sweep runs one per core).
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 24;

// "N" blocks, "Nt" / "Ntokens" tokens, or bytes with a unit ("8GiB",
// "512MiB", "8GB": CLI11's sizes, as --kv-cache-memory-bytes reads them,
// 1024-based); whole blocks (a part of one is left out). 0 when it is none
// of those or outside 1..kMaxBlocks blocks.
std::int64_t parse_capacity_blocks(const std::string& text, int block_size,
                                   std::int64_t bytes_per_block) {
    std::size_t digits = 0;
    while (digits < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[digits])) != 0 || text[digits] == '.')) {
        ++digits;
    }
    if (digits == 0) {
        return 0;
    }
    std::string unit = text.substr(digits);
    for (char& c : unit) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    double blocks = 0;
    try {
        if (unit.empty() || unit == "blocks") {
            blocks = std::stod(text.substr(0, digits));
        } else if (unit == "t" || unit == "tokens") {
            blocks = std::stod(text.substr(0, digits)) / block_size;
        } else {
            std::string bytes = text;
            if (!CLI::AsSizeValue(false)(bytes).empty()) {
                return 0;
            }
            blocks = std::stod(bytes) / static_cast<double>(bytes_per_block);
        }
    } catch (const std::exception&) {
        return 0;
    }
    if (!(blocks >= 1) || blocks > static_cast<double>(kMaxBlocks)) {
        return 0;
    }
    return static_cast<std::int64_t>(blocks);
}

nlohmann::json to_json(const sim::Percentiles& p) {
    return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}};
}

struct SimulateOptions {
    std::string trace;
    std::string format = "auto";
    std::string model_path; // the tokenizer of a kvscope trace's text prompts
    int block_size = 16;
    std::vector<std::string> capacities;
    bool sweep = false;
    std::string plot_path;
    // The default cost model's model (CostModel::llama3_8b_h100_estimate):
    // Llama-3-8B at f16, 2 x 32 layers x 8 KV heads x 128 x 2 bytes.
    // 0: the cost model's model's (131,072 B: Llama-3-8B at f16, the
    // default cost model's; with --calibrate, the calibrated model's).
    std::int64_t bytes_per_token = 0;
    std::string cost_model_path;
    bool calibrate = false;
    std::string backend = "auto";
    std::string save_cost_model_path;
    std::int64_t max_requests = 0;
    bool json = false;
    bool quiet = false; // no progress lines
    std::string record_path;
    int nodes = 1;
    std::string router = "round-robin";
    ServingOptions serving;
};

std::string upper(std::string_view text) {
    std::string out(text);
    for (char& c : out) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return out;
}

nlohmann::json hit_ratio_json(const sim::SimulationResult& r) {
    return {{"blocks", r.hit_ratio_blocks()},
            {"tokens", r.hit_ratio_tokens()},
            {"request_mean", r.hit_ratio_request_mean()}};
}

// One replay's results as JSON (alone, or a point of a sweep).
nlohmann::json result_json(const std::string& trace, const sim::SimulationConfig& config,
                           const sim::SimulationResult& r) {
    return {
        {"trace", trace},
        {"block_size", config.block_size},
        {"capacity_blocks", config.num_blocks},
        {"capacity_tokens", static_cast<std::int64_t>(config.num_blocks) * config.block_size},
        {"capacity_bytes", static_cast<std::int64_t>(config.num_blocks) * config.bytes_per_block},
        {"cache_policy", kv::cache_policy_name(config.cache_policy)},
        {"nodes", config.nodes},
        {"router", sim::router_name(config.router)},
        {"requests", r.requests},
        {"finished", r.finished},
        {"rejected", r.rejected},
        {"preemptions", r.preemptions},
        {"hit_ratio", hit_ratio_json(r)},
        {"prompt_tokens", r.prompt_tokens},
        {"hit_tokens", r.hit_tokens},
        {"ttft_s", to_json(r.ttft_s)},
        {"tpot_s", to_json(r.tpot_s)},
        {"queue_s", to_json(r.queue_s)},
        {"simulated_s", r.simulated_s},
        {"steps", r.steps},
        {"cost_model", nlohmann::json::parse(config.cost.to_json())},
        {"trace_warnings", r.trace_warnings},
        {"wall_s", r.wall_s},
        {"per_node", [&r] {
             nlohmann::json nodes = nlohmann::json::array();
             for (const sim::SimulationResult& node : r.nodes) {
                 nodes.push_back({{"requests", node.requests},
                                  {"finished", node.finished},
                                  {"rejected", node.rejected},
                                  {"preemptions", node.preemptions},
                                  {"hit_ratio", hit_ratio_json(node)},
                                  {"ttft_s", to_json(node.ttft_s)},
                                  {"simulated_s", node.simulated_s}});
             }
             return nodes;
         }()}};
}

int run_sweep(const SimulateOptions& o, const std::vector<sim::SimulationConfig>& configs,
              const std::vector<kv::CachePolicy>& policies);

// The trace's reader; text prompts (kvscope traces) read with the tokenizer
// of --model, or of the model setup.sh fetched, loaded once for every reader.
sim::TraceOpener trace_opener(const SimulateOptions& o) {
    const sim::TraceFormat format = *sim::parse_trace_format(o.format);
    const sim::TokenizerSource source = sim::model_tokenizer(o.model_path);
    return [path = o.trace, format, source] {
        return sim::open_trace(path, format, source);
    };
}

// The cost model the options choose - the default estimate, a file's, or
// one measured here (--calibrate) - and the K/V bytes a token takes under it.
struct ChosenCost {
    sim::CostModel cost;
    std::int64_t bytes_per_token = 0;
};

ChosenCost choose_cost_model(const SimulateOptions& o) {
    ChosenCost chosen{sim::deployment_config(o.block_size).cost, sim::kDeploymentBytesPerToken};
    if (!o.cost_model_path.empty()) {
        std::ifstream in(o.cost_model_path);
        if (!in) {
            throw std::runtime_error("cannot read " + o.cost_model_path);
        }
        std::stringstream text;
        text << in.rdbuf();
        chosen.cost = sim::CostModel::from_json(text.str());
        if (chosen.cost.source.empty()) {
            chosen.cost.source = o.cost_model_path;
        }
    }
    if (o.calibrate) {
        const auto model = session::load_model(session::model_file(o.model_path));
        const sim::CalibrationPlan plan;
        constexpr int kBlock = 16;
        const session::ResolvedBackend resolved =
            session::resolve_backend_kind_with_reason(*session::parse_backend_kind(o.backend));
        if (!resolved.fallback_note.empty() && !o.json) {
            std::fprintf(stderr, "%s\n", resolved.fallback_note.c_str());
        }
        const auto backend = session::make_backend(
            {.kind = resolved.kind, .threads = 0, .throttle_ms = 0}, model,
            {.block_size = kBlock,
             .num_blocks = static_cast<int>(sim::calibration_tokens(plan, kBlock) / kBlock),
             .format = {},
             // A plain cache: the simulator's blocks hold every layer, so
             // a token's bytes are all its layers' (and the timing sees
             // the same attention: a sliding layer masks its window).
             .hybrid = false});
        const std::string where = session::describe_backend(*backend);
        if (!o.json) {
            std::fprintf(stderr, "Calibrating the cost model: %s on %s\n",
                         session::model_name(*model).c_str(), where.c_str());
        }
        const std::vector<sim::MeasuredStep> steps =
            sim::measure_steps(*backend, plan, [&o](const std::string& what) {
                if (!o.json) {
                    std::fprintf(stderr, "  timing %s\n", what.c_str());
                }
            });
        chosen.cost =
            sim::fit_cost_model(steps, "measured: " + session::model_name(*model) + " on " +
                                           session::backend_kind_name(resolved.kind).data() +
                                           " (kvscope simulate --calibrate, " +
                                           std::to_string(steps.size()) + " timed steps)");
        chosen.bytes_per_token =
            backend->kv_cache_bytes() /
            (static_cast<std::int64_t>(backend->num_blocks()) * backend->block_size());
        if (!o.json) {
            std::fprintf(stderr,
                         "  a step: %.3f ms + %.4f ms a prefill token + %.4f ms a decoding "
                         "sequence + %.6f ms a cached token read; %lld B of K/V a token\n",
                         1e3 * chosen.cost.step_s, 1e3 * chosen.cost.prefill_token_s,
                         1e3 * chosen.cost.decode_sequence_s, 1e3 * chosen.cost.kv_token_read_s,
                         static_cast<long long>(chosen.bytes_per_token));
        }
        if (!o.save_cost_model_path.empty()) {
            std::ofstream out(o.save_cost_model_path);
            out << chosen.cost.to_json() << "\n";
            if (!out) {
                throw std::runtime_error("cannot write " + o.save_cost_model_path);
            }
        }
    }
    if (o.bytes_per_token > 0) {
        chosen.bytes_per_token = o.bytes_per_token;
    }
    return chosen;
}

int run_simulate(const SimulateOptions& o) {
    try {
        const ChosenCost chosen = choose_cost_model(o);
        const std::int64_t bytes_per_token = chosen.bytes_per_token;
        const std::int64_t bytes_per_block = bytes_per_token * o.block_size;
        std::vector<std::int64_t> capacities;
        for (const std::string& text : o.capacities) {
            const std::int64_t blocks = parse_capacity_blocks(text, o.block_size, bytes_per_block);
            if (blocks <= 0) {
                std::cerr << "kvscope simulate: --capacity '" << text
                          << "' is not a KV capacity (blocks, e.g. 20000; tokens, 320000t; or "
                             "bytes, 8GiB) of 1 to "
                          << kMaxBlocks << " blocks\n";
                return exit_usage;
            }
            capacities.push_back(blocks);
        }
        sim::SimulationConfig config = sim::deployment_config(o.block_size);
        config.num_blocks = static_cast<int>(capacities.front());
        config.bytes_per_block = bytes_per_block;
        session::RunConfig serving;
        o.serving.apply(serving);
        config.prefix_caching = serving.prefix_caching;
        config.cache_policy = serving.cache_policy;
        config.scheduler = serving.scheduler;
        config.nodes = o.nodes;
        config.router = sim::parse_router(o.router).value_or(sim::RouterKind::round_robin);
        std::vector<kv::CachePolicy> policies;
        for (const std::string& name : o.serving.cache_policies) {
            const kv::CachePolicy policy = *kv::parse_cache_policy(name);
            if (std::find(policies.begin(), policies.end(), policy) == policies.end()) {
                policies.push_back(policy);
            }
        }
        config.max_requests = o.max_requests;
        config.cost = chosen.cost;
        if (!o.record_path.empty() && config.nodes > 1) {
            std::cerr << "kvscope simulate: --record records one engine: leave out --nodes\n";
            return exit_usage;
        }
        if (capacities.size() > 1 || policies.size() > 1 || o.sweep) {
            if (!o.record_path.empty()) {
                std::cerr << "kvscope simulate: --record takes one capacity and one policy, "
                             "not a sweep\n";
                return exit_usage;
            }
            return run_sweep(o, sim::sweep_configs(config, capacities, policies, o.sweep),
                             policies);
        }
        if (!o.plot_path.empty()) {
            std::cerr << "kvscope simulate: --plot draws a sweep: give --sweep or several "
                         "capacities\n";
            return exit_usage;
        }
        const std::unique_ptr<sim::TraceReader> reader = trace_opener(o)();
        sim::TraceReader& trace = *reader;
        // Never over an existing file: it may be the recording to compare with.
        std::unique_ptr<profiler::Recorder> recorder;
        if (!o.record_path.empty()) {
            recorder = std::make_unique<profiler::Recorder>(
                o.record_path,
                profiler::simulate_metadata(o.trace, sim::config_json(config), "kvscope simulate"));
        }
        ProgressLine progress(o.quiet || o.json);
        const sim::SimulationResult r =
            sim::simulate(trace, config, recorder.get(), [&progress](std::int64_t read) {
                progress.update(std::to_string(read) + " requests replayed");
                return true;
            });
        progress.finish();
        if (recorder) {
            recorder->set_metadata("complete", "yes");
            recorder->close();
            if (!o.json) {
                std::printf("Recorded to %s\n", o.record_path.c_str());
            }
        }
        for (const std::string& warning : trace.warnings()) {
            std::cerr << "warning: " << warning << "\n";
        }
        if (trace.warning_count() > static_cast<std::int64_t>(trace.warnings().size())) {
            std::cerr << "warning: " << trace.warning_count() - trace.warnings().size()
                      << " more warnings\n";
        }
        if (o.json) {
            std::cout << json_text(result_json(o.trace, config, r), 2) << "\n";
            return exit_ok;
        }
        std::printf("Trace %s: %lld requests (%lld finished, %lld rejected) over %.1f s "
                    "simulated, replayed in %.1f s\n",
                    o.trace.c_str(), static_cast<long long>(r.requests),
                    static_cast<long long>(r.finished), static_cast<long long>(r.rejected),
                    r.simulated_s, r.wall_s);
        std::printf(
            "KV cache: %d blocks of %d tokens (%lld tokens, %.2f GiB at %lld B/token)%s, "
            "%s\n",
            config.num_blocks, config.block_size,
            static_cast<long long>(config.num_blocks) * config.block_size,
            static_cast<double>(config.num_blocks) * static_cast<double>(bytes_per_block) /
                (1024.0 * 1024 * 1024),
            static_cast<long long>(bytes_per_token), config.nodes > 1 ? " on each node" : "",
            config.prefix_caching
                ? (upper(kv::cache_policy_name(config.cache_policy)) + " reclaims cached blocks")
                      .c_str()
                : "prefix caching off");
        if (config.nodes > 1) {
            std::printf("Cluster: %d nodes, %s router\n", config.nodes,
                        std::string(sim::router_name(config.router)).c_str());
        }
        std::printf("Prefix-cache hit ratio (at each request's first admission):\n");
        std::printf("  by blocks  %6.2f%%  (cached blocks of all full and partial prompt blocks)\n",
                    100 * r.hit_ratio_blocks());
        std::printf("  by tokens  %6.2f%%  (cached prompt tokens of all prompt tokens)\n",
                    100 * r.hit_ratio_tokens());
        std::printf("  per request %5.2f%%  (mean over requests of each one's token ratio)\n",
                    100 * r.hit_ratio_request_mean());
        if (!r.nodes.empty()) {
            std::printf("  per node   %8s %8s %8s %8s | %8s %8s %8s | %10s\n", "requests",
                        "finished", "rejected", "preempt", "blocks", "tokens", "request",
                        "TTFT p50");
            for (std::size_t n = 0; n < r.nodes.size(); ++n) {
                const sim::SimulationResult& node = r.nodes[n];
                std::printf(
                    "  node %-5zu %8lld %8lld %8lld %8lld | %7.2f%% %7.2f%% %7.2f%% | "
                    "%10.3f\n",
                    n, static_cast<long long>(node.requests), static_cast<long long>(node.finished),
                    static_cast<long long>(node.rejected), static_cast<long long>(node.preemptions),
                    100 * node.hit_ratio_blocks(), 100 * node.hit_ratio_tokens(),
                    100 * node.hit_ratio_request_mean(), node.ttft_s.p50);
            }
        }
        std::printf("Preemptions: %lld\n", static_cast<long long>(r.preemptions));
        std::printf("Latency under the cost model (%s), seconds:\n", config.cost.source.c_str());
        std::printf("  %-28s %10s %10s %10s %10s\n", "", "mean", "p50", "p90", "p99");
        const auto row = [](const char* name, const sim::Percentiles& p) {
            std::printf("  %-28s %10.3f %10.3f %10.3f %10.3f\n", name, p.mean, p.p50, p.p90, p.p99);
        };
        row("time to first token", r.ttft_s);
        row("time per output token", r.tpot_s);
        row("queueing (arrival to admit)", r.queue_s);
        return exit_ok;
    } catch (const sim::TraceError& e) {
        std::cerr << "kvscope simulate: " << e.what() << "\n";
        return exit_failure;
    } catch (const std::exception& e) {
        std::cerr << "kvscope simulate: " << e.what() << "\n";
        return exit_failure;
    }
}

// `configs`: sim::sweep_configs(), each policy's capacities in turn.
int run_sweep(const SimulateOptions& o, const std::vector<sim::SimulationConfig>& configs,
              const std::vector<kv::CachePolicy>& policies) {
    const sim::SimulationConfig& base = configs.front();
    const std::size_t per_policy = configs.size() / policies.size();
    ProgressLine progress(o.quiet || o.json);
    const std::vector<sim::SimulationResult> results =
        sim::simulate_each(trace_opener(o), configs, [&](std::size_t done) {
            progress.update(std::to_string(done) + " of " + std::to_string(configs.size()) +
                            " configurations replayed");
        });
    progress.finish();
    if (!results.empty() && results.front().trace_warnings > 0) {
        // Every replay read the same lines: say so once (one capacity alone
        // prints the lines themselves).
        std::cerr << "warning: " << results.front().trace_warnings
                  << " trace lines were warned about (replay one capacity to see them)\n";
    }
    if (!o.plot_path.empty()) {
        // One policy: its ratio three ways. Several: each by tokens and by
        // blocks (the per-request mean would crowd the plot).
        std::vector<SweepSeries> series;
        for (std::size_t p = 0; p < policies.size(); ++p) {
            const std::string name = upper(kv::cache_policy_name(policies[p]));
            const std::size_t first = series.size();
            series.push_back({.name = name + ", by tokens", .points = {}});
            series.push_back({.name = name + ", by blocks", .points = {}, .dashed = true});
            if (policies.size() == 1) {
                series.push_back({.name = name + ", per request", .points = {}, .dashed = true});
            }
            for (std::size_t c = 0; c < per_policy; ++c) {
                const std::size_t i = p * per_policy + c;
                const sim::SimulationResult& r = results[i];
                if (r.finished == 0) {
                    continue; // every request rejected: no ratio to draw
                }
                const double tokens = static_cast<double>(configs[i].num_blocks) * base.block_size;
                const bool partial = r.rejected > 0;
                series[first].points.push_back({tokens, r.hit_ratio_tokens(), partial});
                series[first + 1].points.push_back({tokens, r.hit_ratio_blocks(), partial});
                if (policies.size() == 1) {
                    series[first + 2].points.push_back(
                        {tokens, r.hit_ratio_request_mean(), partial});
                }
            }
        }
        const std::string svg =
            hit_ratio_svg("Prefix-cache hit ratio against KV capacity: " +
                              std::filesystem::path(o.trace).filename().string(),
                          series);
        if (is_png_path(o.plot_path)) {
            write_svg_as_png(svg, o.plot_path);
        } else {
            std::ofstream out(o.plot_path);
            out << svg;
            if (!out) {
                std::cerr << "kvscope simulate: cannot write " << o.plot_path << "\n";
                return exit_failure;
            }
        }
    }
    if (o.json) {
        nlohmann::json points = nlohmann::json::array();
        for (std::size_t i = 0; i < configs.size(); ++i) {
            points.push_back(result_json(o.trace, configs[i], results[i]));
        }
        std::cout << json_text(nlohmann::json{{"trace", o.trace}, {"points", points}}, 2) << "\n";
        return exit_ok;
    }
    std::printf("Trace %s: %lld requests; hit ratio at each request's first admission, "
                "latency under the cost model (%s)\n",
                o.trace.c_str(), static_cast<long long>(results.front().requests),
                base.cost.source.c_str());
    if (base.nodes > 1) {
        std::printf("Cluster: %d nodes, %s router; capacities are each node's\n", base.nodes,
                    std::string(sim::router_name(base.router)).c_str());
    }
    std::printf("%6s %10s %11s %9s | %8s %8s %8s | %9s %9s %9s | %7s %8s\n", "policy", "blocks",
                "tokens", "GiB", "blocks", "tokens", "request", "TTFT p50", "TTFT p99", "TPOT p50",
                "preempt", "rejected");
    for (std::size_t i = 0; i < configs.size(); ++i) {
        const sim::SimulationResult& r = results[i];
        const auto blocks = static_cast<long long>(configs[i].num_blocks);
        std::printf("%6s %10lld %11lld %9.2f | %7.2f%% %7.2f%% %7.2f%% | %9.3f %9.3f %9.4f | "
                    "%7lld %8lld\n",
                    upper(kv::cache_policy_name(configs[i].cache_policy)).c_str(), blocks,
                    blocks * base.block_size,
                    static_cast<double>(blocks) * static_cast<double>(base.bytes_per_block) /
                        (1024.0 * 1024 * 1024),
                    100 * r.hit_ratio_blocks(), 100 * r.hit_ratio_tokens(),
                    100 * r.hit_ratio_request_mean(), r.ttft_s.p50, r.ttft_s.p99, r.tpot_s.p50,
                    static_cast<long long>(r.preemptions), static_cast<long long>(r.rejected));
    }
    if (std::any_of(results.begin(), results.end(),
                    [](const sim::SimulationResult& r) { return r.rejected > 0; })) {
        std::printf("Rejected requests (prompts the cache cannot hold) are not in the hit "
                    "ratios: where some are, those ratios describe the rest.\n");
    }
    if (!o.plot_path.empty()) {
        std::printf("Plot: %s\n", o.plot_path.c_str());
    }
    return exit_ok;
}

} // namespace

Command add_simulate_command(CLI::App& app) {
    auto options = std::make_shared<SimulateOptions>();
    // A deployment's scheduler, not this machine's: vLLM's defaults.
    options->serving.max_num_seqs = sim::kDeploymentMaxSeqs;
    options->serving.max_num_batched_tokens = sim::kDeploymentMaxBatchedTokens;
    CLI::App* sub = app.add_subcommand(
        "simulate", "Replay a request trace (Mooncake, Qwen-Bailian or kvscope JSONL) through the "
                    "KV manager and "
                    "scheduler on a cost-model clock: prefix-cache hit ratio and latency");
    sub->add_option("TRACE", options->trace, "The trace, one JSON request a line")
        ->required()
        ->check(CLI::ExistingFile);
    sub->add_option("--format", options->format,
                    "The trace's format: mooncake (hash ids per 512 tokens), qwen-bailian (hash "
                    "ids per 16 tokens), kvscope (prompts or token ids), or auto (from its first "
                    "line)")
        ->check(CLI::IsMember({"auto", "mooncake", "qwen-bailian", "kvscope"}))
        ->capture_default_str();
    sub->add_option("--model", options->model_path,
                    "A GGUF model: its tokenizer reads a kvscope trace's text prompts, and "
                    "--calibrate times it: a file or a name (" +
                        model_names() + "; default: $KVSCOPE_MODEL, or smollm2)")
        ->check(model_file_or_name());
    sub->add_option("--block-size", options->block_size, "Tokens per KV block")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    sub->add_option("--capacity", options->capacities,
                    "KV capacity: blocks (20000), tokens (320000t) or bytes (8GiB); several "
                    "(comma-separated) replay each")
        ->required()
        ->delimiter(',');
    sub->add_flag("--sweep", options->sweep,
                  "With one --capacity: replay ten, halving down from it (a table, and a plot "
                  "with --plot)");
    sub->add_option("--plot", options->plot_path,
                    "Write the sweep's hit ratio against capacity: FILE.svg, or FILE.png");
    sub->add_option("--bytes-per-token", options->bytes_per_token,
                    "K/V bytes per token, for capacities in bytes (default: the cost model's "
                    "model: Llama-3-8B at f16, " +
                        std::to_string(sim::kDeploymentBytesPerToken) +
                        "; with --calibrate, the calibrated model's)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30));
    CLI::Option* cost_model =
        sub->add_option("--cost-model", options->cost_model_path,
                        "A JSON cost model: step_s, prefill_token_s, decode_sequence_s, "
                        "kv_token_read_s (default: a roofline estimate for an 8B model on an H100)")
            ->check(CLI::ExistingFile);
    CLI::Option* calibrate =
        sub->add_flag("--calibrate", options->calibrate,
                      "Measure the cost model instead: time prefill and decode steps of --model on "
                      "--backend here, and fit the four coefficients")
            ->excludes(cost_model);
    sub->add_option("--backend", options->backend, "Where --calibrate times: auto, cpu or cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
        ->capture_default_str()
        ->needs(calibrate);
    sub->add_option("--save-cost-model", options->save_cost_model_path,
                    "With --calibrate: also write the measured cost model, as JSON that "
                    "--cost-model reads")
        ->needs(calibrate);
    sub->add_option("--max-requests", options->max_requests,
                    "Replay only the trace's first N requests")
        ->check(CLI::NonNegativeNumber);
    sub->add_flag("--json", options->json, "Print the results as JSON");
    sub->add_flag("--quiet", options->quiet, kQuietHelp);
    sub->add_option("--nodes", options->nodes,
                    "Replay over a cluster of N engines, each with --capacity of its own, behind "
                    "a router")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    sub->add_option("--router", options->router,
                    "How the cluster routes requests: round-robin, or cache-aware (to the node "
                    "where the request costs least: prompt blocks not cached there plus the "
                    "node's load, as NVIDIA Dynamo's KV router weighs them)")
        ->check(CLI::IsMember({"round-robin", "cache-aware"}))
        ->capture_default_str();
    sub->add_option("--record", options->record_path,
                    "Record the replay (every engine event, on the simulated clock) to a new "
                    "SQLite file that stats, compare, export and the app read");
    options->serving.add_to(*sub, true);
    return {sub, [options] {
                return run_simulate(*options);
            }};
}

} // namespace kvscope::cli
