// The one way the app runs long work off the window's thread: a live run, an
// attach, reading a recording, a quality measurement, a comparison, a
// simulation. Each piece runs on a thread of its own (std::jthread) that its
// owner can ask to stop (std::stop_token) and always joins before it goes, so
// no work outlives what it reports to. Work reports back through Qt's queues
// (run_on_thread_of, emit_on_own_thread in thread_handoff.h); short view
// builds go to the view pool instead (background_build.h).
//
// Plain threads, joined: ThreadSanitizer sees their start and the join,
// where a QThread's wait goes through Qt, which it cannot see into. Used from
// the owner's thread only.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <stop_token>
#include <thread>
#include <vector>

namespace kvscope::ui {

class WorkerThreads {
public:
    using Work = std::function<void(std::stop_token stop)>;

    WorkerThreads() = default;
    ~WorkerThreads(); // asks every piece to stop and waits for it
    WorkerThreads(const WorkerThreads&) = delete;
    WorkerThreads& operator=(const WorkerThreads&) = delete;

    // Starts `work` on a thread of its own. Its stop_token is raised by
    // stop(), by the source returned (a Cancel button may hold it), or when
    // the owner goes; the work should then return soon.
    std::stop_source start(Work work);
    // Asks every piece under way to stop; they return in their own time.
    void stop();
    // Returns once every piece has returned.
    void wait();
    // Some piece has not returned yet.
    bool busy() const;

private:
    struct Worker {
        std::shared_ptr<std::atomic<bool>> done;
        std::jthread thread;
    };
    // Joins the pieces that have returned (at once: they have).
    void reap();

    std::vector<Worker> workers_;
};

} // namespace kvscope::ui
