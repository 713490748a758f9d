// Hands each event to several sinks in turn (a recording and a live view).
#pragma once

#include "engine/events/engine_event.h"

#include <cstddef>
#include <utility>
#include <vector>

namespace kvscope::events {

class TeeSink final : public EventSink {
public:
    void add(EventSink* sink) {
        if (sink != nullptr) {
            sinks_.push_back(sink);
        }
    }
    void on_event(const EngineEvent& event) override {
        for (EventSink* sink : sinks_) {
            sink->on_event(event);
        }
    }
    // Copies for every sink but the last, which takes the events.
    void on_events(std::vector<EngineEvent>&& events) override {
        for (std::size_t i = 0; i + 1 < sinks_.size(); ++i) {
            std::vector<EngineEvent> copy = events;
            sinks_[i]->on_events(std::move(copy));
        }
        if (!sinks_.empty()) {
            sinks_.back()->on_events(std::move(events));
        }
        events.clear();
    }
    bool empty() const { return sinks_.empty(); }

private:
    std::vector<EventSink*> sinks_;
};

} // namespace kvscope::events
