// `kvscope attach ENDPOINT...`: watches the KV-cache events serving engines
// (vLLM, SGLang) publish over ZeroMQ, one SUB socket per publisher, shows a
// status line while it runs and, at the end, what each engine holds: resident
// blocks per rank and cache tier, and its prefix trees; with --metrics, the
// engines' own counters (KV usage, prefix cache hit rate, preemptions) polled
// from their Prometheus endpoints, and their capacity. --record writes the
// same typed events a kvscope run records, so stats, export and the app
// replay an attached engine like any other run.
#include "app/cli/command.h"
#include "app/cli/progress_line.h"
#include "app/cli/stop_request.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/json_text.h"
#include "profiler/attach/attach_session.h"
#include "profiler/attach/token_text.h"
#include "profiler/recorded_attach.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

namespace kvscope::cli {
namespace {

struct AttachCommandOptions {
    attach::AttachTargets targets; // what to attach to, as the options give it
    std::string tokenizer_path;
    std::string record_path;
    bool overwrite = false;
    double duration_s = 0;
    bool json = false;
    bool quiet = false; // no progress lines
    int trees = 3;
};

using attach::AttachedState;
using attach::AttachSession;
using attach::ResidentBlocks;
using attach::TierKey;

std::string prefix_text(const ResidentBlocks& blocks, const TierKey& key,
                        const attach::PrefixTree& tree, const tokenizer::Tokenizer* tokenizer) {
    // The root block's tokens: the start every prompt in the tree shares.
    const attach::ResidentBlock* root = blocks.find(key, tree.root);
    if (root == nullptr) {
        return "";
    }
    return tokenizer != nullptr ? "\"" + attach::tokens_text(*tokenizer, root->token_ids, 60) + "\""
                                : attach::token_ids_text(root->token_ids);
}

// "metrics (URL): KV usage 25.0%, prefix cache hit rate 40.0% (...)".
void print_metrics(const AttachedState::Source& s, const attach::MetricsEndpointStatus& status) {
    const attach::MetricsSummary m = attach::summarize_metrics(s.metrics);
    std::printf("  metrics %s: %lld polls, %lld failed", status.url.c_str(),
                static_cast<long long>(status.polls), static_cast<long long>(status.failures));
    if (!status.last_error.empty()) {
        std::printf(" (%s: %s)", status.failing ? "failing" : "last problem",
                    status.last_error.c_str());
    }
    std::printf("\n");
    if (s.metrics.empty()) {
        std::printf("    no metric kvscope reads came back (vLLM's vllm:kv_cache_usage_perc, "
                    "vllm:prefix_cache_*, vllm:num_preemptions, vllm:cache_config_info; "
                    "SGLang's sglang:token_usage, sglang:cache_hit_rate)\n");
        return;
    }
    std::printf("   ");
    if (m.kv_usage) {
        std::printf(" KV usage %.1f%%;", 100.0 * *m.kv_usage);
    }
    if (m.prefix_hit_rate) {
        std::printf(" prefix cache hit rate %.1f%%", 100.0 * *m.prefix_hit_rate);
        if (m.prefix_hits && m.prefix_queries) {
            std::printf(" (%.0f of %.0f tokens since the engine started", *m.prefix_hits,
                        *m.prefix_queries);
            if (m.prefix_hit_rate_since) {
                std::printf("; %.1f%% since attaching", 100.0 * *m.prefix_hit_rate_since);
            }
            std::printf(")");
        }
        std::printf(";");
    }
    if (m.preemptions) {
        std::printf(" %.0f preemptions;", *m.preemptions);
    }
    if (m.num_gpu_blocks) {
        std::printf(" capacity %lld blocks", static_cast<long long>(*m.num_gpu_blocks));
        if (m.block_size) {
            std::printf(" of %lld tokens", static_cast<long long>(*m.block_size));
        }
    }
    std::printf("\n");
}

void print_summary(const AttachSession& session, const AttachCommandOptions& options,
                   const tokenizer::Tokenizer* tokenizer, double seconds) {
    std::printf("attached to %zu publisher%s for %.1f s\n", session.sources().size(),
                session.sources().size() == 1 ? "" : "s", seconds);
    for (const auto& [id, s] : session.state().sources()) {
        const attach::EventSource& source = *session.sources().at(static_cast<std::size_t>(id));
        const attach::SourceCounts n = source.counts();
        std::printf("\nsource %lld  %s", static_cast<long long>(id), source.describe().c_str());
        std::printf("\n  %lld messages, %lld events; gaps %lld (replayed %lld, lost %lld), "
                    "restarts %lld, rejected messages %lld, silent %.1f s\n",
                    static_cast<long long>(n.messages), static_cast<long long>(n.events),
                    static_cast<long long>(n.gaps), static_cast<long long>(n.replayed),
                    static_cast<long long>(n.lost), static_cast<long long>(n.restarts),
                    static_cast<long long>(n.decode_errors), source.silent_for().count());
        if (n.decode.unknown_event_types + n.decode.unknown_fields + n.decode.malformed_events >
            0) {
            std::printf("  skipped: %lld events of unknown types, %lld unknown fields, %lld "
                        "malformed events\n",
                        static_cast<long long>(n.decode.unknown_event_types),
                        static_cast<long long>(n.decode.unknown_fields),
                        static_cast<long long>(n.decode.malformed_events));
        }
        if (!source.last_error().empty()) {
            std::printf("  last problem: %s\n", source.last_error().c_str());
        }
        if (n.messages == 0) {
            std::printf("  nothing received: is the engine running with KV events on, "
                        "publishing at this endpoint (see docs/attach.md)?\n");
        }
        const std::vector<attach::MetricsEndpointStatus> metrics = session.metrics_status();
        if (static_cast<std::size_t>(id) < metrics.size()) {
            print_metrics(s, metrics[static_cast<std::size_t>(id)]);
        }
        const std::int64_t capacity =
            options.targets.num_blocks > 0 ? options.targets.num_blocks : s.capacity_blocks();
        const attach::ResidencyCounts& c = s.blocks.counts();
        std::printf("  blocks stored %lld, removed %lld (%lld removals of blocks stored before we "
                    "attached), cleared %lld time%s\n",
                    static_cast<long long>(c.stored), static_cast<long long>(c.removed),
                    static_cast<long long>(c.unknown_removed), static_cast<long long>(c.clears),
                    c.clears == 1 ? "" : "s");
        for (const auto& [key, tier] : s.blocks.tiers()) {
            const std::vector<attach::PrefixTree> trees = s.blocks.trees(key);
            std::printf("  rank %lld %s: %zu resident blocks", static_cast<long long>(key.rank),
                        key.medium.c_str(), tier.blocks.size());
            if (capacity > 0) {
                std::printf(" of %lld (%.1f%%)", static_cast<long long>(capacity),
                            100.0 * static_cast<double>(tier.blocks.size()) /
                                static_cast<double>(capacity));
            }
            std::printf(" in %zu prefix tree%s\n", trees.size(), trees.size() == 1 ? "" : "s");
            for (std::size_t i = 0; i < trees.size() && i < static_cast<std::size_t>(options.trees);
                 ++i) {
                std::printf("    %6lld blocks, depth %4lld: %s\n",
                            static_cast<long long>(trees[i].blocks),
                            static_cast<long long>(trees[i].depth),
                            prefix_text(s.blocks, key, trees[i], tokenizer).c_str());
            }
        }
    }
    std::printf("\nKV events name blocks by hash: they do not tell physical block ids, which "
                "request owns a block,\nreference counts, or partly filled blocks.\n");
}

// One progress line: what has come in so far.
std::string status_line(const AttachSession& session, double seconds) {
    const attach::AttachProgress progress = session.progress();
    std::size_t resident = 0;
    for (const auto& [id, s] : session.state().sources()) {
        resident += s.blocks.size();
    }
    // A metrics URL that fails says so (and why) without stopping the attach.
    const std::string metrics = progress.failing_metrics.empty()
                                    ? std::string()
                                    : "; metrics " + progress.failing_metrics +
                                          " failing: " + progress.failing_metrics_error;
    char line[160];
    std::snprintf(line, sizeof line, "%.0f s: %lld events, %zu blocks resident, %lld lost%s",
                  seconds, static_cast<long long>(progress.events), resident,
                  static_cast<long long>(progress.lost),
                  progress.silent_s > 5 ? " (a source is silent)" : "");
    return line + metrics;
}

int run_attach(const AttachCommandOptions& options) {
    std::optional<tokenizer::Tokenizer> tokenizer;
    if (!options.tokenizer_path.empty()) {
        try {
            tokenizer =
                tokenizer::Tokenizer::from_gguf(gguf::GgufFile::open(options.tokenizer_path));
        } catch (const std::exception& error) {
            std::cerr << "kvscope attach: cannot read a tokenizer from " << options.tokenizer_path
                      << ": " << error.what() << "\n";
            return exit_usage;
        }
    }

    profiler::AttachRecording recording;
    recording.path = options.record_path;
    recording.overwrite = options.overwrite;
    recording.recorded_by = "kvscope attach";
    recording.tokenizer_path = options.tokenizer_path;
    std::unique_ptr<profiler::RecordedAttach> attached;
    try {
        attached = std::make_unique<profiler::RecordedAttach>(options.targets, recording,
                                                              std::vector<events::EventSink*>{});
    } catch (const std::invalid_argument& error) {
        std::cerr << "kvscope attach: " << error.what() << "\n";
        return exit_usage;
    }
    const AttachSession& session = attached->session();
    const std::vector<std::string>& endpoints = attached->endpoints();
    std::fprintf(stderr, "attached to %s; %s\n", json_text(nlohmann::json(endpoints)).c_str(),
                 options.duration_s > 0 ? "stopping after --duration" : "Ctrl-C stops");

    const StopRequest stop; // Ctrl-C or SIGTERM ends the watch and keeps the recording
    const auto start = std::chrono::steady_clock::now();
    auto next_status = start;
    ProgressLine progress(options.quiet);
    const auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    while (!StopRequest::requested() &&
           (options.duration_s <= 0 || elapsed() < options.duration_s)) {
        attached->session().poll(std::chrono::milliseconds(50));
        if (std::chrono::steady_clock::now() >= next_status) {
            progress.update(status_line(session, elapsed()));
            next_status += std::chrono::seconds(1);
        }
    }
    const double seconds = elapsed();
    // Ctrl-C is how an attach ends: the recording is whole either way.
    const profiler::RecordedAttach::Closed closed = attached->close(seconds);
    progress.finish();
    if (attached->recording() && closed.write_error.empty()) {
        std::fprintf(stderr, "recorded %lld events in %lld commits to %s\n",
                     static_cast<long long>(closed.written.events),
                     static_cast<long long>(closed.written.commits), options.record_path.c_str());
    } else if (attached->recording()) {
        std::fprintf(stderr, "kvscope attach: error: %s\n", closed.write_error.c_str());
    }
    if (options.json) {
        std::cout << json_text(profiler::attach_summary_json(session, seconds), 2) << "\n";
    } else {
        print_summary(session, options, tokenizer ? &*tokenizer : nullptr, seconds);
    }
    return closed.write_error.empty() ? exit_ok : exit_failure;
}

} // namespace

Command add_attach_command(CLI::App& app) {
    auto options = std::make_shared<AttachCommandOptions>();
    CLI::App* parser = app.add_subcommand(
        "attach", "Watch the KV-cache events of running vLLM, SGLang (ZeroMQ) or TensorRT-LLM "
                  "(HTTP) engines, and record them");
    parser->add_option("endpoints", options->targets.endpoints,
                       "Each publisher's event endpoint, tcp://HOST:PORT or HOST:PORT (one per "
                       "engine or data-parallel rank; vLLM's default port is 5557)");
    parser->add_option("--replay", options->targets.replays,
                       "Each publisher's replay endpoint, in the same order (vLLM: "
                       "replay_endpoint, e.g. HOST:5558); fills gaps in the stream");
    parser->add_option("--topic", options->targets.topic,
                       "Subscribe to this topic only (the engine's kv-events topic); default: all");
    parser
        ->add_option("--block-size", options->targets.block_size,
                     "The engines' block size in tokens, for publishers that do not send it")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
    parser
        ->add_option("--num-blocks", options->targets.num_blocks,
                     "Each engine's KV capacity in blocks, to show occupancy (default: "
                     "num_gpu_blocks from vllm:cache_config_info when --metrics is given)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
    parser->add_option("--metrics", options->targets.metrics_urls,
                       "Each publisher's Prometheus metrics URL, in the same order (vLLM: "
                       "http://HOST:8000/metrics; SGLang: http://HOST:30000/metrics with "
                       "--enable-metrics; HOST:PORT means http://HOST:PORT/metrics): KV usage, "
                       "prefix cache hit rate, preemptions, capacity");
    parser
        ->add_option("--metrics-interval", options->targets.metrics_interval_s,
                     "Seconds between polls of each --metrics URL")
        ->check(CLI::Range(0.05, 3600.0))
        ->capture_default_str();
    parser->add_option("--trtllm", options->targets.trtllm_urls,
                       "TensorRT-LLM servers to poll for KV-cache events (trtllm-serve's POST "
                       "/kv_cache_events; HOST:PORT or http://HOST:PORT), numbered after the "
                       "ENDPOINTs");
    parser
        ->add_option("--trtllm-interval", options->targets.trtllm_interval_s,
                     "Seconds between polls of each --trtllm server")
        ->check(CLI::Range(0.01, 3600.0))
        ->capture_default_str();
    parser
        ->add_option("--tokenizer", options->tokenizer_path,
                     "A GGUF file whose tokenizer turns token ids into text (the engine's model)")
        ->check(CLI::ExistingFile);
    parser->add_option("--record", options->record_path,
                       "Record the events into this SQLite recording");
    parser->add_flag("--force", options->overwrite, "Replace the recording if it exists");
    parser
        ->add_option("--duration", options->duration_s,
                     "Stop after this many seconds (default: run until Ctrl-C)")
        ->check(CLI::Range(0.0, 1e9));
    parser->add_option("--trees", options->trees, "Prefix trees to list per tier")
        ->check(CLI::Range(0, 1000))
        ->capture_default_str();
    parser->add_flag("--json", options->json, "Print the summary as JSON");
    parser->add_flag("--quiet", options->quiet, kQuietHelp);
    return {parser, [options] {
                return run_attach(*options);
            }};
}

} // namespace kvscope::cli
