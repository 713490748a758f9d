// Runs the engine on a thread of its own so the window never waits on it:
// loads the model, serves the workload in real time, pauses and stops on
// request. Events go to a LiveEventQueue the window drains a frame at a time
// (and to a recording when asked); progress and the end come back as
// signals, failures as failed(QString) with the reason, never a crash.
#pragma once

#include "app/ui/run/run_settings.h"
#include "profiler/store/live_event_queue.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <QObject>
#include <QString>

namespace kvscope::ui {

class EngineController : public QObject {
    Q_OBJECT
public:
    explicit EngineController(QObject* parent = nullptr);
    ~EngineController() override; // stops the run and waits for its thread

    // Starts a run; false when one is under way (nothing happens then).
    bool start(const RunSettings& settings);
    void set_paused(bool paused);
    void stop(); // finished() follows once the engine has let go
    bool running() const { return running_.load(); }
    bool paused() const { return paused_.load(); }
    // The engine thread is parked by a pause (the step under way has ended).
    bool holding() const { return holding_.load(); }
    std::int64_t steps_run() const { return steps_run_.load(); } // of the current run

    // What the engine has emitted since the last take(); the queue of the
    // current run (a new run gets a new queue).
    std::shared_ptr<profiler::LiveEventQueue> events() const;

signals:
    void started(); // a new run (and queue) began: clear the views
    void status(const QString& text);
    void loading(bool busy);            // the model is loading (no finer progress to show)
    void progress(int done, int total); // requests ended so far
    void finished(const QString& summary);
    void failed(const QString& message);

private:
    void run(RunSettings settings, std::shared_ptr<profiler::LiveEventQueue> queue);
    void wait_while_paused();
    void join();

    std::thread thread_;
    std::atomic<bool> running_{false};
    std::atomic<bool> stop_{false};
    std::atomic<bool> paused_{false};
    std::atomic<bool> holding_{false};
    std::atomic<std::int64_t> steps_run_{0};
    std::mutex pause_mutex_;
    std::condition_variable resume_;
    mutable std::mutex queue_mutex_;
    std::shared_ptr<profiler::LiveEventQueue> queue_;
};

} // namespace kvscope::ui
