// One serving run, wired once for every caller: from a RunConfig to the
// loaded model, the backend (through the backend factory), the requests
// (with their reproducible per-request seeds) and the LlmEngine, events
// flowing to the sink given. `kvscope run`, `record` and `generate` (through
// profiler/recorded_run.h and session/generation.h) and the app's engine
// controller start runs here and nowhere else.
#pragma once

#include "engine/events/engine_event.h"
#include "engine/model/llama_model.h"
#include "engine/runner/backend.h"
#include "engine/sched/llm_engine.h"
#include "engine/session/run_config.h"

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kvscope::session {

class ServingSession {
public:
    // Loads the model (unless one is given), reads the workload, makes the
    // backend and the engine. Throws std::runtime_error (bad settings, a
    // missing model, a cache that holds fewer than 2 blocks) or
    // std::invalid_argument (a bad workload) with a message for the user.
    // `sink` may be null and must outlive the session.
    ServingSession(const RunConfig& config, events::EventSink* sink,
                   std::shared_ptr<const model::LlamaModel> model = nullptr);
    ~ServingSession();
    ServingSession(const ServingSession&) = delete;
    ServingSession& operator=(const ServingSession&) = delete;

    const RunConfig& config() const { return config_; }
    const model::LlamaModel& model() const { return *model_; }
    const std::filesystem::path& model_path() const { return model_path_; }
    const runner::Backend& backend() const { return *backend_; }
    // Set when `auto` fell back to the CPU: the line saying so and why.
    const std::string& backend_note() const { return backend_note_; }
    sched::LlmEngine& engine() { return *engine_; }
    const sched::LlmEngine& engine() const { return *engine_; }
    std::size_t request_count() const { return specs_.size(); }

    // What a recording of this run carries about it: model name, request
    // count, backend and the engine's settings as JSON.
    std::map<std::string, std::string> recording_metadata() const;

    struct ServeOptions {
        std::function<bool()> stop_requested; // true: abort what is left and return
        std::function<void()> before_step;    // see DriveOptions
        std::function<void(const sched::StepStats&)> on_step;
    };
    // Submits every request at its arrival (or all at once, per the config)
    // and steps the engine until all have ended. Returns the engine's
    // request ids in workload order.
    std::vector<std::int64_t> serve(const ServeOptions& options);

    // Requests that have ended (finished, aborted or rejected) so far.
    std::size_t ended_requests() const;

private:
    RunConfig config_;
    std::filesystem::path model_path_;
    std::shared_ptr<const model::LlamaModel> model_;
    std::vector<sched::RequestSpec> specs_;
    std::string backend_note_;
    std::unique_ptr<runner::Backend> backend_;
    std::shared_ptr<const model::LlamaModel> draft_model_; // --draft-model
    std::unique_ptr<runner::Backend> draft_backend_;       // its KV pool, the target's shape
    std::unique_ptr<sched::LlmEngine> engine_;
};

// The model file a config names (see model_file()), for callers that must
// know it before the session loads it (a recording's metadata).
std::filesystem::path run_model_file(const RunConfig& config);

} // namespace kvscope::session
