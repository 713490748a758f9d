#include "app/ui/run/engine_controller.h"

#include "app/ui/workers/thread_handoff.h"
#include "engine/session/serving_session.h"
#include "profiler/recorded_run.h"

#include <vector>

namespace kvscope::ui {

EngineController::EngineController(QObject* parent)
    : LiveSource(parent) {}

EngineController::~EngineController() {
    stop_and_wait();
}

bool EngineController::start(const RunSettings& settings) {
    if (running()) {
        return false;
    }
    if (const std::string problem = settings.problem(); !problem.empty()) {
        emit failed(QString::fromStdString(problem));
        return false;
    }
    paused_ = false;
    steps_run_ = 0;
    return launch([this, settings](const std::stop_token& stop,
                                   const std::shared_ptr<profiler::LiveEventQueue>& queue) {
        run(settings, stop, *queue);
    });
}

void EngineController::set_paused(bool paused) {
    {
        const std::lock_guard lock(pause_mutex_);
        paused_ = paused;
    }
    resume_.notify_all();
    if (running()) {
        emit status(paused ? tr("Paused") : tr("Running"));
    }
}

void EngineController::stop() {
    {
        const std::lock_guard lock(pause_mutex_);
        paused_ = false;
    }
    LiveSource::stop(); // wakes a paused run: resume_ waits on the stop token too
}

void EngineController::wait_while_paused(const std::stop_token& stop) {
    std::unique_lock lock(pause_mutex_);
    holding_ = paused_.load() && !stop.stop_requested();
    resume_.wait(lock, stop, [this] { return !paused_.load(); });
    holding_ = false;
}

// Runs on the controller's worker thread; its signals are emitted on the
// window's thread, where the controller lives (thread_handoff.h), and
// nothing below touches a widget.
void EngineController::run(const RunSettings& settings, const std::stop_token& stop,
                           profiler::LiveEventQueue& queue) {
    try {
        const std::filesystem::path model_file = session::run_model_file(settings);
        // Never over an existing file: it may be the run to compare with.
        profiler::RecordingOptions recording;
        recording.path = settings.record_path;
        recording.overwrite = false;
        recording.recorded_by = "kvscope-ui";
        // A recording that can no longer be written stops the run, as
        // `kvscope record` does by default; the run then fails with why.
        recording.stop_on_write_error = true;
        const auto notice = [this](const std::string& text,
                                   profiler::RecordedRun::NoticeKind kind) {
            if (kind != profiler::RecordedRun::NoticeKind::info) {
                emit_on_own_thread(this, &LiveSource::status, QString::fromStdString(text));
            }
        };

        emit_on_own_thread(this, &EngineController::loading, true);
        emit_on_own_thread(this, &LiveSource::status,
                           tr("Loading %1 …").arg(QString::fromStdString(model_file.string())));
        std::unique_ptr<profiler::RecordedRun> run;
        try {
            run = std::make_unique<profiler::RecordedRun>(
                settings, recording, std::vector<events::EventSink*>{&queue}, notice);
        } catch (...) {
            emit_on_own_thread(this, &EngineController::loading, false);
            throw;
        }
        emit_on_own_thread(this, &EngineController::loading, false);
        const session::ServingSession& session = run->session();
        QString running = tr("Running: %1").arg(QString::fromStdString(settings.describe()));
        if (!session.backend_note().empty()) { // auto fell back to the CPU: say so and why
            running += " (" + QString::fromStdString(session.backend_note()) + ")";
        }
        emit_on_own_thread(this, &LiveSource::status, running);

        const int total = static_cast<int>(session.request_count());
        profiler::RecordedRun::ServeOptions serve;
        serve.stop_requested = [&stop] {
            return stop.stop_requested();
        };
        serve.on_step = [&](const sched::StepStats& step) {
            steps_run_ = step.step + 1;
            if (step.step % 8 == 0) {
                emit_on_own_thread(this, &EngineController::progress,
                                   static_cast<int>(session.ended_requests()), total);
            }
            wait_while_paused(stop);
        };
        const profiler::ServedRun served = run->serve(serve);
        const session::RunSummary& s = served.summary;
        emit_on_own_thread(this, &EngineController::progress, total, total);
        if (!served.write_error.empty()) {
            throw profiler::RecordingError(served.write_error);
        }
        QString summary = served.interrupted ? tr("Stopped after %1 s: %2 of %3 requests finished")
                                             : tr("Done in %1 s: %2 of %3 requests finished");
        summary = summary.arg(s.seconds, 0, 'f', 1).arg(s.finished).arg(total);
        if (s.speculation.verifies > 0) {
            summary += tr("; speculation kept %1% of %2 drafted tokens, %3 tokens a verifying "
                          "pass, %4 steps")
                           .arg(100 * s.speculation.acceptance_rate(), 0, 'f', 0)
                           .arg(s.speculation.drafted)
                           .arg(s.speculation.tokens_per_verify(), 0, 'f', 2)
                           .arg(s.steps);
        }
        if (session.engine().offload_tier() != nullptr) {
            summary += tr("; the offload tier gave %1 prompt tokens back (%2 blocks loaded in "
                          "%3 ms, %4 saved in %5 ms)")
                           .arg(s.tier_hit_tokens)
                           .arg(s.tier.reads)
                           .arg(s.tier.read_seconds * 1e3, 0, 'f', 1)
                           .arg(s.tier.writes)
                           .arg(s.tier.write_seconds * 1e3, 0, 'f', 1);
        }
        if (!settings.record_path.empty()) {
            summary += tr("; recorded to %1").arg(QString::fromStdString(settings.record_path));
        }
        report_finished(summary);
    } catch (const std::exception& e) {
        report_failed(QString::fromUtf8(e.what()));
    }
}

} // namespace kvscope::ui
