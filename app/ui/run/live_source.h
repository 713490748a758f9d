// What the window follows live: a run of kvscope's own engine
// (EngineController) or serving engines attached to (AttachController). A
// source works on a thread of its own (workers/worker_threads.h) and queues
// its events for the window, which drains them a frame at a time into a
// store; status, the end and failures come back as signals on the window's
// thread, never a crash. MainWindow holds whichever source runs and treats
// both alike.
#pragma once

#include "app/ui/workers/worker_threads.h"
#include "profiler/store/live_event_queue.h"

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>

#include <QObject>
#include <QString>

namespace kvscope::profiler {
class RunStore;
}

namespace kvscope::ui {

class LiveSource : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;

    bool running() const { return running_.load(); }
    // Whether the run can be paused (kvscope's engine; not engines attached to).
    virtual bool can_pause() const { return false; }
    // Asks the source to end; finished() or failed() follows.
    virtual void stop();
    // What the source has emitted since the last take(); the queue of the
    // current run (a new run gets a new queue).
    std::shared_ptr<profiler::LiveEventQueue> events() const;

    // The store a run that begins is shown in.
    virtual std::shared_ptr<profiler::RunStore> new_store() const;
    // Hands `store` what the source keeps beside its events (an attach's
    // state snapshots); called before each drain of events().
    virtual void feed(profiler::RunStore& store);

signals:
    void started(); // a new run (and queue) began: a new store
    void status(const QString& text);
    void finished(const QString& summary);
    void failed(const QString& message);

protected:
    using Work =
        std::function<void(std::stop_token stop, std::shared_ptr<profiler::LiveEventQueue> queue)>;
    // Starts `work` with a new queue on the source's thread, after started();
    // false while a run is under way. Work ends by calling report_finished()
    // or report_failed().
    bool launch(Work work);
    // From the work's thread: the run ended, or failed, and says so.
    void report_finished(const QString& summary);
    void report_failed(const QString& message);
    // For the derived class's destructor: stops the run and waits for its
    // thread, while what the work uses is still there.
    void stop_and_wait();

private:
    std::atomic<bool> running_{false};
    mutable std::mutex queue_mutex_;
    std::shared_ptr<profiler::LiveEventQueue> queue_ = std::make_shared<profiler::LiveEventQueue>();
    WorkerThreads worker_;
};

} // namespace kvscope::ui
