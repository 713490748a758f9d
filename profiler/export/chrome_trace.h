// Export of a recording as a Chrome trace (JSON), which Perfetto and
// chrome://tracing open: engine steps on one track, CPU ops on another, a
// lane per request (queued, prefill, decode, with preemptions and evictions
// marked), counters for block occupancy and cache fill, and, from GPU runs,
// kernels and copies per CUDA stream, NVTX ranges and device memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>

namespace kvscope::profiler {

struct ChromeTraceSummary {
    std::int64_t steps = 0;
    std::int64_t requests = 0;
    std::int64_t counters = 0;
    std::int64_t ops = 0;         // per-op CPU slices
    std::int64_t kernels = 0;     // GPU kernels, copies and memsets
    std::int64_t nvtx_ranges = 0; // from GPU capture
};

// Throws RecordingError when `recording` is not a readable recording.
ChromeTraceSummary export_chrome_trace(const std::filesystem::path& recording, std::ostream& out);

} // namespace kvscope::profiler
