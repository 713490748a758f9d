// Hands each event to several sinks in turn (a recording and a live view).
#pragma once

#include "engine/events/engine_event.h"

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
    bool empty() const { return sinks_.empty(); }

private:
    std::vector<EventSink*> sinks_;
};

} // namespace kvscope::events
