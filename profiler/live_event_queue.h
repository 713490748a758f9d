// Hands engine events from the engine's thread to a viewer's thread: the
// engine's on_event() appends under a mutex and returns at once; the viewer
// take()s everything that has come, a frame at a time, and feeds its RunStore.
#pragma once

#include "engine/events/engine_event.h"

#include <iterator>
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
        return pending_.size();
    }
    // Everything queued since the last call, in order.
    std::vector<events::EngineEvent> take() {
        std::vector<events::EngineEvent> taken;
        const std::lock_guard lock(mutex_);
        taken.swap(pending_);
        return taken;
    }

private:
    std::mutex mutex_;
    std::vector<events::EngineEvent> pending_;
};

} // namespace kvscope::profiler
