// A live run of kvscope's own engine (a LiveSource): loads the model, serves
// the workload in real time through profiler::RecordedRun (recording it when
// asked), pauses and stops on request. Progress comes back as signals.
#pragma once

#include "app/ui/run/live_source.h"
#include "app/ui/run/run_settings.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stop_token>

#include <QString>

namespace kvscope::ui {

class EngineController : public LiveSource {
    Q_OBJECT
public:
    explicit EngineController(QObject* parent = nullptr);
    ~EngineController() override; // stops the run and waits for its thread

    // Starts a run; false when one is under way (nothing happens then) or
    // the settings are refused (failed() says why).
    bool start(const RunSettings& settings);
    void set_paused(bool paused);
    void stop() override; // finished() follows once the engine has let go
    bool can_pause() const override { return true; }
    bool paused() const { return paused_.load(); }
    // The engine thread is parked by a pause (the step under way has ended).
    bool holding() const { return holding_.load(); }
    std::int64_t steps_run() const { return steps_run_.load(); } // of the current run

signals:
    void loading(bool busy);            // the model is loading (no finer progress to show)
    void progress(int done, int total); // requests ended so far

private:
    void run(const RunSettings& settings, const std::stop_token& stop,
             profiler::LiveEventQueue& queue);
    void wait_while_paused(const std::stop_token& stop);

    std::atomic<bool> paused_{false};
    std::atomic<bool> holding_{false};
    std::atomic<std::int64_t> steps_run_{0};
    std::mutex pause_mutex_;
    std::condition_variable_any resume_; // wakes on a stop request too
};

} // namespace kvscope::ui
