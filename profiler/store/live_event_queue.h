// Hands engine events from the engine's thread to a viewer's thread: the
// engine's on_event() appends under a mutex and returns at once; the viewer
// take()s what has come, a frame at a time, and feeds its RunStore.
#pragma once

#include "engine/events/engine_event.h"

#include <cstddef>
#include <iterator>
#include <limits>
#include <mutex>
#include <vector>

namespace kvscope::profiler {

class LiveEventQueue final : public events::EventSink {
public:
    void on_event(const events::EngineEvent& event) override {
        const std::lock_guard lock(mutex_);
        pending_.push_back(event);
    }
    void on_events(std::vector<events::EngineEvent>&& events) override {
        const std::lock_guard lock(mutex_);
        if (pending_.empty()) {
            pending_.swap(events);
        } else {
            pending_.insert(pending_.end(), std::make_move_iterator(events.begin()),
                            std::make_move_iterator(events.end()));
        }
        events.clear();
    }
    // Events queued and not yet taken: a producer that can wait (an attach,
    // whose publishers' high-water marks drop for it) holds off while the
    // viewer is this far behind.
    std::size_t pending() {
        const std::lock_guard lock(mutex_);
        return pending_.size() - head_;
    }
    // The oldest `max` events queued (all by default), in order. A viewer
    // that takes a bounded share per frame stays responsive when events come
    // faster than it can apply them.
    std::vector<events::EngineEvent>
    take(std::size_t max = std::numeric_limits<std::size_t>::max()) {
        std::vector<events::EngineEvent> taken;
        const std::lock_guard lock(mutex_);
        if (pending_.size() - head_ <= max) {
            if (head_ == 0) {
                taken.swap(pending_);
            } else {
                taken.assign(std::make_move_iterator(pending_.begin() + offset(head_)),
                             std::make_move_iterator(pending_.end()));
                pending_.clear();
            }
            head_ = 0;
            return taken;
        }
        taken.assign(std::make_move_iterator(pending_.begin() + offset(head_)),
                     std::make_move_iterator(pending_.begin() + offset(head_ + max)));
        head_ += max;
        // Taken events are dropped from the front once they are half the
        // vector: each event is moved at most twice.
        if (head_ * 2 >= pending_.size()) {
            pending_.erase(pending_.begin(), pending_.begin() + offset(head_));
            head_ = 0;
        }
        return taken;
    }

private:
    static std::ptrdiff_t offset(std::size_t index) { return static_cast<std::ptrdiff_t>(index); }

    std::mutex mutex_;
    std::vector<events::EngineEvent> pending_;
    std::size_t head_ = 0; // pending_[0, head_) were taken
};

} // namespace kvscope::profiler
