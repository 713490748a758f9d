// One engine event in a line, for tests and benchmarks that feed a RunStore
// or a Recorder synthetic runs.
#pragma once

#include "engine/events/engine_event.h"

#include <cstdint>
#include <string>
#include <utility>

namespace kvscope::test {

inline events::EngineEvent engine_event(std::int64_t t_ns, events::EventKind kind,
                                        std::int64_t request = -1, std::int32_t block = -1,
                                        std::int64_t a = 0, std::int64_t b = 0, std::int64_t c = 0,
                                        std::int64_t d = 0, std::string text = {}) {
    events::EngineEvent event;
    event.time_ns = t_ns;
    event.kind = kind;
    event.request = request;
    event.block = block;
    event.a = a;
    event.b = b;
    event.c = c;
    event.d = d;
    event.text = std::move(text);
    return event;
}

} // namespace kvscope::test
