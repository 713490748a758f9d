// `kvscope run`: serves a workload (a preset or a JSONL trace) with
// continuous batching, prefix caching and the chosen KV formats, then prints
// where every request's K/V came from and how fast it went. --events writes
// every engine event as JSON lines.
#include "app/cli/command.h"
#include "app/cli/engine_options.h"
#include "app/cli/eviction_options.h"
#include "app/cli/gpu_capture.h"
#include "app/cli/serving_options.h"
#include "app/cli/throttled_backend.h"
#include "engine/events/tee_sink.h"
#include "engine/gpu_devices.h"
#include "engine/sched/llm_engine.h"
#include "engine/workload/run_workload.h"
#include "kvscope/build_info.h"
#include "profiler/machine_info.h"
#include "profiler/recorder.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

namespace kvscope::cli {
namespace {

struct RunOptions {
    EngineOptions engine;
    ServingOptions serving;
    EvictionOptions eviction;
    std::string workload = "shared-prefix";
    workload::PresetOptions preset;
    bool all_at_once = false;
    float temperature = 0.0f;
    std::string events_path;
    bool json = false;
    bool per_request = false;
    int throttle_ms = 0;  // sleep in each forward pass: a stand-in for a slower build
    std::string out_path; // record: the recording to write
    bool overwrite = false;
    std::string gpu_capture = "auto"; // record: auto, on, off
};

volatile std::sig_atomic_t g_interrupted = 0;

// Writes each event as one JSON object per line.
class JsonlEventSink final : public events::EventSink {
public:
    explicit JsonlEventSink(std::ostream& out)
        : out_(out) {}
    void on_event(const events::EngineEvent& e) override {
        nlohmann::json j{{"t_ns", e.time_ns}, {"kind", events::event_kind_name(e.kind)}};
        if (e.request >= 0) {
            j["request"] = e.request;
        }
        if (e.block >= 0) {
            j["block"] = e.block;
        }
        j["a"] = e.a;
        j["b"] = e.b;
        j["c"] = e.c;
        j["d"] = e.d;
        if (!e.text.empty()) {
            j["text"] = e.text;
        }
        out_ << j.dump() << '\n';
    }

private:
    std::ostream& out_;
};

double percentile(std::vector<double> values, double p) {
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
    return values[std::min(index, values.size() - 1)];
}

int run_run(RunOptions& options) {
    if (const std::string problem = options.eviction.resolve(options.engine.block_size);
        !problem.empty()) {
        std::cerr << "kvscope run: " << problem << "\n";
        return exit_usage;
    }
    std::vector<workload::WorkloadRequest> requests =
        workload::load_workload(options.workload, options.preset);
    // The recording and GPU capture start before the model loads: a file in
    // the way fails at once, and the weights' upload is captured too.
    std::unique_ptr<profiler::Recorder> recorder;
    std::unique_ptr<profiler::CuptiTracer> tracer;
    if (!options.out_path.empty()) {
        std::map<std::string, std::string> metadata = profiler::machine_info();
        metadata["kvscope_version"] = build_info::version;
        metadata["model_path"] =
            options.engine.model_path.empty() ? "(default)" : options.engine.model_path;
        metadata["workload"] = options.workload;
        recorder =
            std::make_unique<profiler::Recorder>(options.out_path, metadata, options.overwrite);
        recorder->set_gpu_devices(query_gpu_devices().devices);
        tracer = start_gpu_capture(options.gpu_capture, *recorder);
    }
    const auto model = options.engine.load_model();
    sampling::SamplingParams sampling;
    sampling.temperature = options.temperature;
    std::vector<sched::RequestSpec> specs =
        workload::to_request_specs(requests, model->tokenizer(), sampling);
    for (std::size_t i = 0; i < specs.size(); ++i) {
        if (!requests[i].sampling) {
            specs[i].sampling.seed = options.preset.seed * 1'000'003 + i; // reproducible
        }
    }
    std::unique_ptr<runner::Backend> backend = options.engine.make_backend(model, 8192);
    if (options.throttle_ms > 0) {
        backend = std::make_unique<ThrottledBackend>(std::move(backend), options.throttle_ms);
    }

    std::ofstream events_file;
    std::unique_ptr<JsonlEventSink> sink;
    if (!options.events_path.empty()) {
        events_file.open(options.events_path, std::ios::trunc);
        if (!events_file) {
            throw std::runtime_error("cannot write " + options.events_path);
        }
        sink = std::make_unique<JsonlEventSink>(events_file);
    }
    if (recorder) {
        const model::LlamaConfig& c = model->config();
        recorder->set_metadata("model_name", c.name.empty() ? c.architecture : c.name);
        recorder->set_metadata("requests", std::to_string(specs.size()));
        recorder->set_metadata("backend", backend->name());
    }
    events::TeeSink tee;
    tee.add(sink.get());
    tee.add(recorder.get());
    sched::EngineConfig config = options.serving.engine_config();
    config.eviction = options.eviction.config;
    config.record_ops = recorder != nullptr; // per-op CPU slices in recordings
    const tokenizer::Tokenizer& tok = model->tokenizer();
    config.ends_generation = [&tok](std::int32_t id) {
        return tok.ends_generation(id);
    };
    if (recorder) { // text in the recording, for the app's tooltips and requests table
        config.token_piece = [&tok](std::int32_t id) {
            return tok.token_bytes(id, true);
        };
    }
    sched::LlmEngine engine(*backend, config, tee.empty() ? nullptr : &tee);
    if (recorder) {
        recorder->set_metadata("run_config", engine.describe_config());
    }

    std::fprintf(stderr, "workload: %s, %zu requests; %s; %s\n", options.workload.c_str(),
                 specs.size(), options.serving.describe().c_str(),
                 config.eviction.describe().c_str());
    g_interrupted = 0;
    auto previous = std::signal(SIGINT, [](int) { g_interrupted = 1; });
    const auto start = std::chrono::steady_clock::now();
    int peak_used = 0;
    workload::DriveOptions drive;
    drive.real_time = !options.all_at_once;
    drive.stop_requested = [] {
        return g_interrupted != 0;
    };
    std::size_t finished_so_far = 0;
    drive.on_step = [&](const sched::StepStats& s) {
        peak_used = std::max(peak_used, engine.kv().stats().used);
        if (s.step % 50 == 0) {
            finished_so_far = 0;
            for (const std::int64_t id : engine.request_ids()) {
                finished_so_far += engine.request(id).is_done() ? 1 : 0;
            }
            std::fprintf(stderr, "\rstep %lld: %zu of %zu requests done, %zu running  ",
                         static_cast<long long>(s.step), finished_so_far, specs.size(),
                         engine.scheduler().running_count());
        }
    };
    const std::vector<std::int64_t> ids = workload::drive(engine, specs, drive);
    std::signal(SIGINT, previous);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (engine.steps() > 0) {
        std::fputs("\n", stderr); // end the progress line
    }

    std::int64_t prompt = 0, hits = 0, computed = 0, recomputed = 0, resumed = 0, short_shared = 0,
                 generated = 0, evicted = 0;
    int preemptions = 0, finished = 0, aborted = 0, rejected = 0;
    std::vector<double> ttft_ms;
    nlohmann::json per_request = nlohmann::json::array();
    for (const std::int64_t id : ids) {
        const sched::Request& r = engine.request(id);
        const sched::RequestAccounting& a = r.accounting;
        prompt += r.prompt_length();
        hits += a.prefix_hit_tokens;
        computed += a.computed_tokens;
        recomputed += a.recomputed_tokens;
        resumed += a.resumed_hit_tokens;
        short_shared += a.shared_short_tokens;
        generated += r.generated;
        evicted += a.evicted_tokens;
        preemptions += a.preemptions;
        finished += r.state == sched::RequestState::finished;
        aborted += r.state == sched::RequestState::aborted;
        rejected += r.state == sched::RequestState::rejected;
        if (r.first_token_ns >= 0) {
            ttft_ms.push_back(static_cast<double>(r.first_token_ns - r.arrival_ns) * 1e-6);
        }
        per_request.push_back(
            {{"id", id},
             {"state", sched::request_state_name(r.state)},
             {"reason", r.finish_reason},
             {"prompt_tokens", r.prompt_length()},
             {"prefix_hit_tokens", a.prefix_hit_tokens},
             {"blocks_hit", a.blocks_hit},
             {"blocks_missed", a.blocks_missed},
             {"shared_short_tokens", a.shared_short_tokens},
             {"computed_tokens", a.computed_tokens},
             {"recomputed_tokens", a.recomputed_tokens},
             {"resumed_hit_tokens", a.resumed_hit_tokens},
             {"preemptions", a.preemptions},
             {"evicted_tokens", a.evicted_tokens},
             {"generated_tokens", r.generated},
             {"ttft_ms", r.first_token_ns >= 0
                             ? static_cast<double>(r.first_token_ns - r.arrival_ns) * 1e-6
                             : -1.0}});
    }
    const double hit_rate =
        prompt > 0 ? static_cast<double>(hits) / static_cast<double>(prompt) : 0;
    nlohmann::json summary{
        {"workload", options.workload},
        {"requests", ids.size()},
        {"finished", finished},
        {"aborted", aborted},
        {"rejected", rejected},
        {"prompt_tokens", prompt},
        {"prefix_hit_tokens", hits},
        {"prefix_hit_rate", hit_rate},
        {"shared_short_tokens", short_shared},
        {"computed_tokens", computed},
        {"recomputed_tokens", recomputed},
        {"resumed_hit_tokens", resumed},
        {"preemptions", preemptions},
        {"evicted_tokens", evicted},
        {"generated_tokens", generated},
        {"steps", engine.steps()},
        {"seconds", seconds},
        {"output_tokens_per_second", seconds > 0 ? static_cast<double>(generated) / seconds : 0},
        {"ttft_ms_p50", percentile(ttft_ms, 0.5)},
        {"ttft_ms_p99", percentile(ttft_ms, 0.99)},
        {"peak_blocks_used", peak_used},
        {"total_blocks", engine.kv().total_blocks()},
        {"kv_bytes_per_token",
         kv::kv_bytes_per_token(backend->cache_format(), model->config().layers,
                                model->config().kv_heads, model->config().head_dim,
                                backend->block_size())},
    };
    if (recorder) {
        if (tracer) {
            tracer->stop(); // hands the last GPU records over before the file closes
        }
        recorder->set_metadata("summary", summary.dump());
        recorder->set_metadata("complete", g_interrupted != 0 ? "interrupted" : "yes");
        recorder->close();
        const profiler::RecorderStats written = recorder->stats();
        std::fprintf(stderr, "recorded %lld events and %lld GPU records in %lld commits to %s\n",
                     static_cast<long long>(written.events),
                     static_cast<long long>(written.gpu_records),
                     static_cast<long long>(written.commits), options.out_path.c_str());
        if (written.dropped_gpu_records > 0) {
            std::fprintf(stderr,
                         "warning: CUPTI dropped %lld GPU records (its buffers were full)\n",
                         static_cast<long long>(written.dropped_gpu_records));
        }
    }
    if (options.per_request) {
        summary["per_request"] = per_request;
    }
    if (options.json) {
        std::cout << summary.dump(2) << "\n";
    } else {
        std::printf("requests        %zu: %d finished, %d aborted, %d rejected\n", ids.size(),
                    finished, aborted, rejected);
        std::printf("prompt tokens   %lld: %lld from the prefix cache (%.1f%%), %lld computed\n",
                    static_cast<long long>(prompt), static_cast<long long>(hits), 100 * hit_rate,
                    static_cast<long long>(prompt - hits));
        std::printf("                %lld shared with a cached block but fewer than a block\n",
                    static_cast<long long>(short_shared));
        std::printf("preemptions     %d: %lld tokens recomputed, %lld found cached again\n",
                    preemptions, static_cast<long long>(recomputed),
                    static_cast<long long>(resumed));
        if (config.eviction.enabled()) {
            std::printf("eviction        %lld tokens dropped (%s)\n",
                        static_cast<long long>(evicted), config.eviction.describe().c_str());
        }
        std::printf("generated       %lld tokens in %.2f s (%.1f tokens/s), %lld steps\n",
                    static_cast<long long>(generated), seconds,
                    seconds > 0 ? static_cast<double>(generated) / seconds : 0.0,
                    static_cast<long long>(engine.steps()));
        std::printf("first token     p50 %.0f ms, p99 %.0f ms after arrival\n",
                    percentile(ttft_ms, 0.5), percentile(ttft_ms, 0.99));
        std::printf("KV blocks       peak %d of %d in use\n", peak_used,
                    engine.kv().total_blocks());
        if (options.per_request) {
            std::printf("\n%6s %-9s %7s %7s %8s %8s %6s %8s  %s\n", "id", "state", "prompt",
                        "cached", "computed", "recomp", "out", "ttft ms", "reason");
            for (const auto& r : per_request) {
                std::printf(
                    "%6lld %-9s %7lld %7lld %8lld %8lld %6lld %8.0f  %s\n",
                    r["id"].get<long long>(), r["state"].get<std::string>().c_str(),
                    r["prompt_tokens"].get<long long>(), r["prefix_hit_tokens"].get<long long>(),
                    r["computed_tokens"].get<long long>(), r["recomputed_tokens"].get<long long>(),
                    r["generated_tokens"].get<long long>(), r["ttft_ms"].get<double>(),
                    r["reason"].get<std::string>().c_str());
            }
        }
    }
    return g_interrupted != 0 ? 130 : exit_ok;
}

void add_workload_options(CLI::App* parser, const std::shared_ptr<RunOptions>& options);

} // namespace

Command add_run_command(CLI::App& app) {
    auto options = std::make_shared<RunOptions>();
    CLI::App* parser = app.add_subcommand(
        "run", "Serve a workload with continuous batching and report prefix hits, preemptions "
               "and latency");
    add_workload_options(parser, options);
    return {parser, [options] {
                return run_run(*options);
            }};
}

Command add_record_command(CLI::App& app) {
    auto options = std::make_shared<RunOptions>();
    CLI::App* parser = app.add_subcommand(
        "record", "Serve a workload like run and record every engine event into an SQLite "
                  "recording");
    parser->add_option("-o,--out", options->out_path, "The recording to write (.sqlite)")
        ->required();
    parser->add_flag("--force", options->overwrite, "Replace the file if it exists");
    parser->add_option("--gpu-capture", options->gpu_capture, kGpuCaptureHelp)
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    add_workload_options(parser, options);
    return {parser, [options] {
                return run_run(*options);
            }};
}

namespace {

void add_workload_options(CLI::App* parser, const std::shared_ptr<RunOptions>& options) {
    parser
        ->add_option("-w,--workload", options->workload,
                     "A preset or a JSONL trace file. Presets:\n" +
                         workload::workload_preset_help())
        ->capture_default_str();
    parser->add_option("--requests", options->preset.requests, "Requests a preset makes")
        ->check(CLI::Range(1, 1'000'000))
        ->capture_default_str();
    parser->add_option("--rate", options->preset.rate, "Preset arrivals per second (Poisson)")
        ->check(CLI::Range(0.001, 1e6))
        ->capture_default_str();
    parser->add_option("--seed", options->preset.seed, "Seed of the preset and of sampling")
        ->capture_default_str();
    parser->add_option("-n,--max-tokens", options->preset.max_tokens, "Tokens per preset request")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    parser
        ->add_option("--temperature,--temp", options->temperature,
                     "Sampling temperature of requests that set none; 0 is greedy")
        ->check(CLI::Range(0.0, 100.0))
        ->capture_default_str();
    parser->add_flag("--all-at-once", options->all_at_once,
                     "Submit every request at the start instead of at its arrival time");
    parser->add_option("--events", options->events_path,
                       "Write every engine event to this file as JSON lines");
    parser->add_flag("--json", options->json, "Print the summary as JSON");
    parser->add_flag("--per-request", options->per_request, "Also list every request");
    parser
        ->add_option("--throttle-ms", options->throttle_ms,
                     "Sleep this long in every step's forward pass, a stand-in for a slower "
                     "build (to try regression gates)")
        ->check(CLI::Range(0, 60000));
    options->engine.add_to(*parser);
    options->serving.add_to(*parser);
    options->eviction.add_to(*parser);
}

} // namespace

} // namespace kvscope::cli
