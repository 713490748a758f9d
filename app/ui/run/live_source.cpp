#include "app/ui/run/live_source.h"

#include "app/ui/workers/thread_handoff.h"
#include "profiler/store/run_store.h"

namespace kvscope::ui {

void LiveSource::stop() {
    worker_.stop();
}

std::shared_ptr<profiler::LiveEventQueue> LiveSource::events() const {
    const std::lock_guard lock(queue_mutex_);
    return queue_;
}

std::shared_ptr<profiler::RunStore> LiveSource::new_store() const {
    return std::make_shared<profiler::RunStore>();
}

void LiveSource::feed(profiler::RunStore&) {}

bool LiveSource::launch(Work work) {
    if (running_.load()) {
        return false;
    }
    worker_.wait(); // the last run's thread has ended (running_ is down); reap it
    auto queue = std::make_shared<profiler::LiveEventQueue>();
    {
        const std::lock_guard lock(queue_mutex_);
        queue_ = queue;
    }
    running_ = true;
    // The thread first, so a stop asked for by a started() handler reaches
    // it; what the work reports is queued to this thread, after started().
    worker_.start([work = std::move(work), queue](std::stop_token stop) { work(stop, queue); });
    emit started();
    return true;
}

void LiveSource::report_finished(const QString& summary) {
    running_ = false;
    emit_on_own_thread(this, &LiveSource::finished, summary);
}

void LiveSource::report_failed(const QString& message) {
    running_ = false;
    emit_on_own_thread(this, &LiveSource::failed, message);
}

void LiveSource::stop_and_wait() {
    stop();
    worker_.wait();
}

} // namespace kvscope::ui
