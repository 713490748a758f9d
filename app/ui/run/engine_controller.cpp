#include "app/ui/run/engine_controller.h"

#include "app/ui/workers/thread_handoff.h"
#include "engine/events/tee_sink.h"
#include "engine/session/serving_session.h"
#include "engine/spec/speculation_totals.h"
#include "profiler/recorder.h"
#include "profiler/run_metadata.h"

#include <chrono>

namespace kvscope::ui {

EngineController::EngineController(QObject* parent)
    : QObject(parent)
    , queue_(std::make_shared<profiler::LiveEventQueue>()) {}

EngineController::~EngineController() {
    stop();
    join();
}

std::shared_ptr<profiler::LiveEventQueue> EngineController::events() const {
    const std::lock_guard lock(queue_mutex_);
    return queue_;
}

void EngineController::join() {
    if (thread_.joinable()) {
        thread_.join();
    }
}

bool EngineController::start(const RunSettings& settings) {
    if (running_.load()) {
        return false;
    }
    join(); // the last run's thread has ended; reap it
    if (const std::string problem = settings.problem(); !problem.empty()) {
        emit failed(QString::fromStdString(problem));
        return false;
    }
    stop_ = false;
    paused_ = false;
    steps_run_ = 0;
    auto queue = std::make_shared<profiler::LiveEventQueue>();
    {
        const std::lock_guard lock(queue_mutex_);
        queue_ = queue;
    }
    running_ = true;
    emit started();
    thread_ = std::thread([this, settings, queue] { run(settings, queue); });
    return true;
}

void EngineController::set_paused(bool paused) {
    {
        const std::lock_guard lock(pause_mutex_);
        paused_ = paused;
    }
    resume_.notify_all();
    if (running_.load()) {
        emit status(paused ? tr("Paused") : tr("Running"));
    }
}

void EngineController::stop() {
    {
        const std::lock_guard lock(pause_mutex_);
        stop_ = true;
        paused_ = false;
    }
    resume_.notify_all();
}

void EngineController::wait_while_paused() {
    std::unique_lock lock(pause_mutex_);
    holding_ = paused_.load() && !stop_.load();
    resume_.wait(lock, [this] { return !paused_.load() || stop_.load(); });
    holding_ = false;
}

// Runs on the controller's worker thread; its signals are emitted on the
// window's thread, where the controller lives (thread_handoff.h), and
// nothing below touches a widget.
void EngineController::run(RunSettings settings, std::shared_ptr<profiler::LiveEventQueue> queue) {
    try {
        const std::filesystem::path model_file = session::run_model_file(settings);
        settings.model_path = model_file.string();
        // The recording opens first: a file in the way fails before the wait.
        // Never over an existing file: it may be the run to compare with.
        std::unique_ptr<profiler::Recorder> recorder;
        if (!settings.record_path.empty()) {
            recorder = std::make_unique<profiler::Recorder>(
                settings.record_path, profiler::run_metadata(settings, model_file, "kvscope-ui"),
                false);
        }
        events::TeeSink tee;
        tee.add(queue.get());
        tee.add(recorder.get());

        emit_on_own_thread(this, &EngineController::loading, true);
        emit_on_own_thread(this, &EngineController::status,
                           tr("Loading %1 …").arg(QString::fromStdString(model_file.string())));
        std::unique_ptr<session::ServingSession> run;
        try {
            run = std::make_unique<session::ServingSession>(settings, &tee);
        } catch (...) {
            emit_on_own_thread(this, &EngineController::loading, false);
            throw;
        }
        emit_on_own_thread(this, &EngineController::loading, false);
        if (recorder) {
            profiler::add_session_metadata(*recorder, *run);
        }
        QString running = tr("Running: %1").arg(QString::fromStdString(settings.describe()));
        if (!run->backend_note().empty()) { // auto fell back to the CPU: say so and why
            running += " (" + QString::fromStdString(run->backend_note()) + ")";
        }
        emit_on_own_thread(this, &EngineController::status, running);

        const auto start = std::chrono::steady_clock::now();
        const int total = static_cast<int>(run->request_count());
        session::ServingSession::ServeOptions serve;
        // A recording that can no longer be written stops the run, as
        // `kvscope record` does by default; close() below then says why.
        serve.stop_requested = [this, &recorder] {
            return stop_.load() || (recorder && recorder->failed());
        };
        serve.on_step = [&](const sched::StepStats& step) {
            steps_run_ = step.step + 1;
            if (step.step % 8 == 0) {
                emit_on_own_thread(this, &EngineController::progress,
                                   static_cast<int>(run->ended_requests()), total);
            }
            wait_while_paused();
        };
        run->serve(serve);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        int done = 0;
        spec::SpeculationTotals speculation;
        std::int64_t tier_hit_tokens = 0;
        for (const std::int64_t id : run->engine().request_ids()) {
            const sched::Request& r = run->engine().request(id);
            done += r.state == sched::RequestState::finished ? 1 : 0;
            tier_hit_tokens += r.accounting.tier_hit_tokens;
            speculation.add(r.accounting.drafted_tokens, r.accounting.accepted_tokens,
                            r.accounting.verify_steps);
        }
        emit_on_own_thread(this, &EngineController::progress, total, total);
        if (recorder) {
            recorder->set_metadata("complete", stop_.load() ? "interrupted" : "yes");
            recorder->close();
        }
        QString summary = stop_.load() ? tr("Stopped after %1 s: %2 of %3 requests finished")
                                       : tr("Done in %1 s: %2 of %3 requests finished");
        summary = summary.arg(seconds, 0, 'f', 1).arg(done).arg(total);
        if (speculation.verifies > 0) {
            summary += tr("; speculation kept %1% of %2 drafted tokens, %3 tokens a verifying "
                          "pass, %4 steps")
                           .arg(100 * speculation.acceptance_rate(), 0, 'f', 0)
                           .arg(speculation.drafted)
                           .arg(speculation.tokens_per_verify(), 0, 'f', 2)
                           .arg(steps_run_.load());
        }
        if (const kv::OffloadTier* tier = run->engine().offload_tier()) {
            summary += tr("; the offload tier gave %1 prompt tokens back (%2 blocks loaded in "
                          "%3 ms, %4 saved in %5 ms)")
                           .arg(tier_hit_tokens)
                           .arg(tier->stats().reads)
                           .arg(tier->stats().read_seconds * 1e3, 0, 'f', 1)
                           .arg(tier->stats().writes)
                           .arg(tier->stats().write_seconds * 1e3, 0, 'f', 1);
        }
        if (!settings.record_path.empty()) {
            summary += tr("; recorded to %1").arg(QString::fromStdString(settings.record_path));
        }
        running_ = false;
        emit_on_own_thread(this, &EngineController::finished, summary);
    } catch (const std::exception& e) {
        running_ = false;
        emit_on_own_thread(this, &EngineController::failed, QString::fromUtf8(e.what()));
    }
}

} // namespace kvscope::ui
