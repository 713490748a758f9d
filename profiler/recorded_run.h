// One served run, recorded or not, wired once: `kvscope run` and `record`
// and the app's engine controller all serve through here, and only print or
// show what it reports. In order: the recording opens (before the model
// loads, so a file in the way fails at once), with CUPTI capture when asked;
// the engine's events go to the recording and to the caller's sinks (the
// app's live view, --events); the ServingSession loads. serve() steps it
// with the caller's stop and step hook, follows the cache's peak, sums the
// run up and closes the recording, complete or interrupted.
#pragma once

#include "engine/events/engine_event.h"
#include "engine/events/tee_sink.h"
#include "engine/session/run_config.h"
#include "engine/session/run_summary.h"
#include "engine/session/serving_session.h"
#include "profiler/gpu/cupti_tracer.h"
#include "profiler/recording/recorder.h"
#include "profiler/step_hook.h"

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope::profiler {

// Whether CUPTI records GPU activity into the recording: automatic when
// this machine has a CUDA GPU; on: try, and say why not; off: never.
// Capture that cannot start is a notice, never a failure.
enum class GpuCapture { automatic, on, off };
std::optional<GpuCapture> parse_gpu_capture(std::string_view name); // "auto", "on", "off"

struct RecordingOptions {
    std::filesystem::path path; // empty: nothing is recorded
    bool overwrite = false;
    std::string recorded_by = "kvscope record"; // the recording's "recorded_by"
    GpuCapture gpu_capture = GpuCapture::off;
    // A recording that can no longer be written (a full disk) stops the run;
    // otherwise the run goes on unrecorded.
    bool stop_on_write_error = true;
};

struct ServedRun {
    session::RunSummary summary;
    bool interrupted = false; // the caller stopped it, or the step hook let go
    bool let_go = false;      // the step hook let go
    RecorderStats written;    // all zero when nothing was recorded
    // The recording could not be written or closed (it is incomplete);
    // empty when it was, or when there was none.
    std::string write_error;
};

class RecordedRun {
public:
    // A line for the user: the CLI prints it to stderr, the app shows all
    // but the info ones in its status line.
    enum class NoticeKind {
        info,         // GPU capture, hardware counters
        warning,      // GPU capture asked for and unavailable
        write_failed, // the recording can no longer be written (the run stops
                      // or goes on unrecorded, as RecordingOptions says)
    };
    using Notice = std::function<void(const std::string& text, NoticeKind kind)>;

    // Opens the recording and loads the session. Throws RecordingError (the
    // file) or what ServingSession throws (settings, model, workload).
    // `sinks` (null ones skipped) must outlive the run.
    RecordedRun(session::RunConfig config, const RecordingOptions& recording,
                const std::vector<events::EventSink*>& sinks, Notice notice,
                StepHook* step_hook = nullptr);
    ~RecordedRun();
    RecordedRun(const RecordedRun&) = delete;
    RecordedRun& operator=(const RecordedRun&) = delete;

    session::ServingSession& session() { return *session_; }
    const session::ServingSession& session() const { return *session_; }
    const std::filesystem::path& model_file() const { return model_file_; }
    bool recording() const { return recorder_ != nullptr; }

    struct ServeOptions {
        std::function<bool()> stop_requested; // sticky: true once, true after
        // After each step (and the step hook's after_step): progress, pause.
        std::function<void(const sched::StepStats&)> on_step;
    };
    // Serves every request, then sums up and saves the recording. Once.
    ServedRun serve(const ServeOptions& options);

private:
    Notice notice_;
    StepHook* step_hook_;
    bool stop_on_write_error_;
    std::filesystem::path model_file_;
    std::unique_ptr<Recorder> recorder_;
    std::unique_ptr<CuptiTracer> tracer_;
    events::TeeSink tee_;
    std::unique_ptr<session::ServingSession> session_;
};

} // namespace kvscope::profiler
