// Export of a recording as a Chrome trace (JSON), which Perfetto and
// chrome://tracing open: engine steps on one track, a lane per request
// (queued, prefill, decode, with preemptions and evictions marked), and
// counters for block occupancy and cache fill.
#pragma once

#include <filesystem>
#include <ostream>

namespace kvscope::profiler {

struct ChromeTraceSummary {
    std::int64_t steps = 0;
    std::int64_t requests = 0;
    std::int64_t counters = 0;
    std::int64_t ops = 0; // per-op CPU slices
};

// Throws RecordingError when `recording` is not a readable recording.
ChromeTraceSummary export_chrome_trace(const std::filesystem::path& recording, std::ostream& out);

} // namespace kvscope::profiler
