// Serving a workload (a preset or a JSONL trace) with continuous batching,
// prefix caching and the chosen KV formats through one ServingSession, then
// printing where every request's K/V came from and how fast it went.
// --events writes every engine event as JSON lines; --out records them.
#include "app/cli/serve_workload.h"

#include "app/cli/command.h"
#include "app/cli/gpu_capture.h"
#include "app/cli/progress_line.h"
#include "app/cli/run_report.h"
#include "app/cli/step_turns.h"
#include "app/cli/stop_request.h"
#include "engine/events/tee_sink.h"
#include "engine/events/typed_events.h"
#include "engine/gpu_devices.h"
#include "engine/session/model_loading.h"
#include "engine/session/run_summary.h"
#include "engine/session/serving_session.h"
#include "engine/util/json_text.h"
#include "engine/util/perf_counters.h"
#include "profiler/recorder.h"
#include "profiler/run_metadata.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

namespace kvscope::cli {
namespace {

// Writes each event as one JSON object per line, its fields by name.
class JsonlEventSink final : public events::EventSink {
public:
    explicit JsonlEventSink(std::ostream& out)
        : out_(out) {}
    void on_event(const events::EngineEvent& e) override {
        nlohmann::json j{{"t_ns", e.time_ns}, {"kind", events::event_kind_name(e.kind)}};
        events::for_each_field(e, [&j]<class Value>(std::string_view name, const Value& value) {
            if constexpr (std::is_same_v<Value, events::StepPhase>) {
                j[std::string(name)] = events::step_phase_name(value);
            } else if constexpr (std::is_same_v<Value, events::ClearCause>) {
                j[std::string(name)] = events::clear_cause_name(value);
            } else {
                j[std::string(name)] = value;
            }
        });
        out_ << json_text(j) << '\n';
    }

private:
    std::ostream& out_;
};

} // namespace

int serve_workload(ServeWorkloadOptions& options) {
    if (std::string problem = options.engine.resolve(); !problem.empty()) {
        std::cerr << "kvscope " << options.command << ": " << problem << "\n";
        return exit_usage;
    }
    if (const std::string problem = options.eviction.resolve(options.engine.config.block_size);
        !problem.empty()) {
        std::cerr << "kvscope " << options.command << ": " << problem << "\n";
        return exit_usage;
    }
    if (const std::string problem = options.speculative.resolve(); !problem.empty()) {
        std::cerr << "kvscope " << options.command << ": " << problem << "\n";
        return exit_usage;
    }
    std::unique_ptr<StepTurns> turns;
    if (!options.step_turns.empty()) {
        try {
            turns = std::make_unique<StepTurns>(options.step_turns);
        } catch (const std::invalid_argument& e) {
            std::cerr << "kvscope " << options.command << ": " << e.what() << "\n";
            return exit_usage;
        }
    }
    session::RunConfig config = options.engine.config;
    options.serving.apply(config);
    config.eviction = options.eviction.config;
    config.speculative = options.speculative.config;
    config.draft_model_path = options.speculative.draft_model;
    if (const std::string problem = options.offload.apply(config); !problem.empty()) {
        std::cerr << "kvscope " << options.command << ": " << problem << "\n";
        return exit_usage;
    }
    config.workload = options.workload;
    config.preset = options.preset;
    config.temperature = options.temperature;
    config.real_time = !options.all_at_once;
    config.backend.throttle_ms = options.throttle_ms;
    config.backend.slowdown_percent = options.slowdown_percent;
    const bool recording = !options.out_path.empty();
    config.record_ops = recording; // per-op CPU slices in recordings
    // Text for the app's tooltips and requests table, and the sampled tokens
    // (token_sampled) that --events promises: every event the engine emits.
    config.token_text = recording || !options.events_path.empty();

    // Ctrl-C or SIGTERM from here on stops the run where it can and keeps
    // the recording, closed and marked interrupted (even during the model's
    // load: the run then serves nothing).
    const StopRequest stop;
    // The recording and GPU capture start before the model loads: a file in
    // the way fails at once, and the weights' upload is captured too.
    std::unique_ptr<profiler::Recorder> recorder;
    std::unique_ptr<profiler::CuptiTracer> tracer;
    const std::filesystem::path model_file = session::run_model_file(config);
    if (recording) {
        recorder = std::make_unique<profiler::Recorder>(
            options.out_path, profiler::run_metadata(config, model_file, "kvscope record"),
            options.overwrite);
        recorder->set_gpu_devices(query_gpu_devices().devices);
        tracer = start_gpu_capture(options.gpu_capture, *recorder);
        if (turns) {
            recorder->set_metadata("steps_in_turns", "yes"); // compare pairs their steps
        }
        // Steps record CPU time always; instructions and cycles where allowed.
        if (const std::string why = perf_counters_unavailable_reason(); why.empty()) {
            std::fprintf(stderr, "Hardware counters: instructions and cycles per step\n");
        } else {
            std::fprintf(stderr, "Hardware counters: not counted (%s); steps record CPU time\n",
                         why.c_str());
        }
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
    events::TeeSink tee;
    tee.add(sink.get());
    tee.add(recorder.get());

    config.model_path = model_file.string();
    session::ServingSession run(config, tee.empty() ? nullptr : &tee);
    std::cerr << "model: " << model_file.string() << " (" << session::describe_model(run.model())
              << ")\n";
    if (!run.backend_note().empty()) {
        std::cerr << run.backend_note() << "\n";
    }
    std::cerr << "backend: " << session::describe_backend(run.backend()) << "\n";
    if (recorder) {
        profiler::add_session_metadata(*recorder, run);
    }
    std::fprintf(stderr, "serving %zu requests: %s\n", run.request_count(),
                 config.describe().c_str());

    const auto start = std::chrono::steady_clock::now();
    int peak_used = 0;
    ProgressLine progress(options.quiet);
    session::ServingSession::ServeOptions serve;
    const bool stop_on_write_error = options.on_write_error == "stop";
    bool write_failed = false;
    serve.stop_requested = [&] {
        if (recorder && !write_failed && recorder->failed()) {
            write_failed = true;
            std::fprintf(stderr, "\nkvscope %s: error: %s; %s\n", options.command.c_str(),
                         recorder->error().c_str(),
                         stop_on_write_error ? "stopping the run (--on-write-error stop)"
                                             : "the run goes on unrecorded "
                                               "(--on-write-error continue)");
        }
        return StopRequest::requested() || (stop_on_write_error && write_failed) ||
               (turns && turns->let_go());
    };
    if (turns) {
        serve.before_step = [&] {
            turns->wait();
        };
    }
    serve.on_step = [&](const sched::StepStats& s) {
        if (turns) {
            turns->done();
        }
        peak_used = std::max(peak_used, run.engine().kv().stats().used);
        if (s.step % 50 == 0) {
            char line[128];
            std::snprintf(line, sizeof line, "step %lld: %zu of %zu requests done, %zu running",
                          static_cast<long long>(s.step), run.ended_requests(), run.request_count(),
                          run.engine().scheduler().running_count());
            progress.update(line);
        }
    };
    const std::vector<std::int64_t> ids = run.serve(serve);
    if (turns) { // the gate hands the other build its turns while this one saves
        turns->finish(!StopRequest::requested() && !(stop_on_write_error && write_failed) &&
                      !turns->let_go());
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress.finish();

    const model::LlamaConfig& shape = run.model().config();
    const session::RunSummary summary = session::summarize_run(
        run.engine(), ids, options.workload, seconds, peak_used,
        kv::kv_bytes_per_token(run.backend().cache_format(), shape.layers, shape.kv_heads,
                               shape.head_dim, run.backend().block_size()),
        &run.model().tokenizer());
    std::string write_error;
    if (sink) {
        events_file.flush();
        if (!events_file) { // a full disk or a file-size limit (SIGXFSZ is ignored)
            write_error = "writing " + options.events_path + " failed: it is incomplete";
            std::fprintf(stderr, "kvscope %s: error: %s\n", options.command.c_str(),
                         write_error.c_str());
        }
    }
    if (recorder) {
        if (tracer) {
            tracer->stop(); // hands the last GPU records over before the file closes
        }
        recorder->set_metadata("summary", summary.to_json(false));
        const bool interrupted = StopRequest::requested() || (turns && turns->let_go());
        recorder->set_metadata("complete", interrupted ? "interrupted" : "yes");
        std::string recording_error;
        try {
            recorder->close();
        } catch (const profiler::RecordingError& error) {
            recording_error = error.what();
        }
        const profiler::RecorderStats written = recorder->stats();
        if (recording_error.empty()) {
            std::fprintf(
                stderr, "recorded %lld events and %lld GPU records in %lld commits to %s\n",
                static_cast<long long>(written.events), static_cast<long long>(written.gpu_records),
                static_cast<long long>(written.commits), options.out_path.c_str());
        } else {
            // Said again at the end, where a reader of the output looks.
            std::fprintf(stderr, "kvscope %s: error: %s\n", options.command.c_str(),
                         recording_error.c_str());
            write_error = recording_error;
        }
        if (written.dropped_gpu_records > 0) {
            std::fprintf(stderr,
                         "warning: CUPTI dropped %lld GPU records (its buffers were full)\n",
                         static_cast<long long>(written.dropped_gpu_records));
        }
    }
    if (options.json) {
        std::cout << summary.to_json(options.per_request, 2) << "\n";
    } else {
        print_summary(summary, config, options.per_request);
    }
    if (StopRequest::requested()) {
        return 128 + StopRequest::signal(); // 130 after Ctrl-C, 143 after SIGTERM
    }
    if (turns && turns->let_go()) {
        std::fprintf(stderr,
                     "kvscope %s: kvscope gate stopped handing over steps; the run "
                     "stopped with them (the recording is marked interrupted)\n",
                     options.command.c_str());
        return exit_failure;
    }
    return write_error.empty() ? exit_ok : exit_failure;
}

void add_workload_options(CLI::App* parser, const std::shared_ptr<ServeWorkloadOptions>& options) {
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
    parser->add_flag("--quiet", options->quiet, kQuietHelp);
    parser->add_flag("--per-request", options->per_request, "Also list every request");
    parser
        ->add_option("--throttle-ms", options->throttle_ms,
                     "Sleep this long in every step's forward pass, a stand-in for a slower "
                     "build (to try regression gates; costs no CPU time)")
        ->check(CLI::Range(0, 60000));
    parser
        ->add_option("--slow-down", options->slowdown_percent,
                     "Run this many percent longer on the CPU in every forward pass, a planted "
                     "regression that CPU-time gates see (percent of the engine thread's CPU "
                     "time)")
        ->check(CLI::Range(0.0, 1000.0));
    // Hidden: only kvscope gate passes it (docs/regression-gates.md).
    parser->add_option("--step-turns", options->step_turns)->group("");
    options->engine.add_to(*parser);
    options->serving.add_to(*parser);
    options->eviction.add_to(*parser);
    options->speculative.add_to(*parser);
    options->offload.add_to(*parser);
}

} // namespace kvscope::cli
