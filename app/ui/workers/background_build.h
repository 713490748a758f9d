// A view's rebuild whose cost grows with what it shows (a hundred thousand
// attached blocks laid out tree by tree) runs on a worker thread, so the
// window's thread only swaps the result in and stays free for input and
// paints. One build runs at a time; a request while one runs waits (only the
// newest) and starts when it ends; a result older than one already delivered
// is dropped. A small input is built at once on the caller's thread, so its
// result is there when the call returns, as scrubbing and tests expect.
//
// The build function must not touch the view: it gets its input by value
// (immutable shared state, copies of settings). Results reach `deliver` on
// the owner's thread; once the owner is gone they are dropped.
#pragma once

#include "app/ui/workers/free_on_worker.h"
#include "app/ui/workers/thread_handoff.h"
#include "app/ui/workers/view_workers.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include <QElapsedTimer>
#include <QObject>

namespace kvscope::ui {

template <class Result>
class BackgroundBuild {
public:
    using Build = std::function<Result()>;
    // The result and what building it took (ms).
    using Deliver = std::function<void(Result, qint64 cost_ms)>;

    BackgroundBuild(QObject* owner, Deliver deliver)
        : link_(std::make_shared<Link>())
        , deliver_(std::move(deliver)) {
        link_->owner = owner;
    }
    ~BackgroundBuild() {
        const std::lock_guard lock(link_->mutex);
        link_->owner = nullptr;
    }
    BackgroundBuild(const BackgroundBuild&) = delete;
    BackgroundBuild& operator=(const BackgroundBuild&) = delete;

    // Builds on this thread before returning when `at_once`, else on a worker.
    void request(Build build, bool at_once) {
        const std::uint64_t generation = ++requested_;
        if (at_once) {
            QElapsedTimer timer;
            timer.start();
            Result result = build();
            delivered_ = generation;
            deliver_(std::move(result), timer.elapsed());
            return;
        }
        if (running_) {
            waiting_ = Waiting{std::move(build), generation};
            return;
        }
        start(std::move(build), generation);
    }
    // A build is running on a worker.
    bool busy() const { return running_; }

private:
    struct Link {
        std::mutex mutex;
        QObject* owner = nullptr;
    };
    struct Waiting {
        Build build;
        std::uint64_t generation = 0;
    };
    struct Built {
        Result result;
        qint64 cost_ms = 0;
    };

    void start(Build build, std::uint64_t generation) {
        QThreadPool* pool = view_workers();
        if (pool == nullptr) { // no application: nothing to keep responsive
            delivered_ = generation;
            deliver_(build(), 0);
            return;
        }
        running_ = true;
        run_on_pool(*pool, [link = link_, build = std::move(build), generation, self = this] {
            QElapsedTimer timer;
            timer.start();
            auto built = std::make_shared<Built>(Built{build(), 0});
            built->cost_ms = timer.elapsed();
            const std::lock_guard lock(link->mutex);
            if (link->owner == nullptr) {
                return; // the view is gone
            }
            // Runs on the owner's thread; dropped with the owner if it
            // goes first (its posted events go with it), and `self` is a
            // member of the owner, alive as long as it is.
            run_on_thread_of(link->owner,
                             [self, built, generation] { self->finished(generation, built); });
        });
    }

    void finished(std::uint64_t generation, const std::shared_ptr<Built>& built) {
        running_ = false;
        if (generation > delivered_) {
            delivered_ = generation;
            deliver_(std::move(built->result), built->cost_ms);
        } else {
            free_on_worker(std::move(built->result)); // outdated: as large as any
        }
        if (waiting_) {
            Waiting next = std::move(*waiting_);
            waiting_.reset();
            if (next.generation > delivered_) {
                start(std::move(next.build), next.generation);
            }
        }
    }

    std::shared_ptr<Link> link_;
    Deliver deliver_;
    bool running_ = false;
    std::optional<Waiting> waiting_;
    std::uint64_t requested_ = 0;
    std::uint64_t delivered_ = 0;
};

} // namespace kvscope::ui
