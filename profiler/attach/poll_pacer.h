// Paces a polling thread (TensorRT-LLM's event endpoint, Prometheus
// metrics): a poll every `interval` from the first, a late one followed at
// once rather than by a burst that catches up, and a wait that ends as soon
// as the thread is told to stop.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace kvscope::attach {

class PollPacer {
public:
    using Clock = std::chrono::steady_clock;

    explicit PollPacer(Clock::duration interval)
        : interval_(interval)
        , next_(Clock::now()) {}

    // Waits, holding `lock` of the mutex `wake` is notified under, until the
    // next poll is due or `stopping()` holds.
    template <class Stopping>
    void wait(std::unique_lock<std::mutex>& lock, std::condition_variable& wake,
              Stopping stopping) {
        next_ += interval_;
        const auto now = Clock::now();
        if (next_ < now) {
            next_ = now; // a slow reply: ask again at once rather than in a burst
        }
        wake.wait_until(lock, next_, stopping);
    }

private:
    Clock::duration interval_;
    Clock::time_point next_;
};

} // namespace kvscope::attach
