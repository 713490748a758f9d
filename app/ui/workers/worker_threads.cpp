#include "app/ui/workers/worker_threads.h"

#include <algorithm>

namespace kvscope::ui {

WorkerThreads::~WorkerThreads() {
    stop();
    wait();
}

std::stop_source WorkerThreads::start(Work work) {
    reap();
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::jthread thread([work = std::move(work), done](std::stop_token stop) {
        work(std::move(stop));
        done->store(true, std::memory_order_release);
    });
    std::stop_source source = thread.get_stop_source();
    workers_.push_back({std::move(done), std::move(thread)});
    return source;
}

void WorkerThreads::stop() {
    for (Worker& worker : workers_) {
        worker.thread.request_stop();
    }
}

void WorkerThreads::wait() {
    for (Worker& worker : workers_) {
        if (worker.thread.joinable()) {
            worker.thread.join();
        }
    }
    workers_.clear();
}

bool WorkerThreads::busy() const {
    return std::any_of(workers_.begin(), workers_.end(), [](const Worker& worker) {
        return !worker.done->load(std::memory_order_acquire);
    });
}

void WorkerThreads::reap() {
    std::erase_if(workers_, [](Worker& worker) {
        if (!worker.done->load(std::memory_order_acquire)) {
            return false;
        }
        worker.thread.join();
        return true;
    });
}

} // namespace kvscope::ui
