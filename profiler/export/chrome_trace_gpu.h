// The GPU half of the Chrome trace export: a process per GPU with a track
// per CUDA stream (kernels, copies, memsets), a track of NVTX ranges per
// host thread, and a device-memory counter. Empty for CPU recordings.
#pragma once

#include "profiler/export/chrome_trace.h"

#include <cstdint>
#include <nlohmann/json.hpp>

struct sqlite3;

namespace kvscope::profiler {

// Microseconds from `from_ns` to `to_ns`, the unit of every Chrome trace
// time and duration. In doubles: a damaged recording's times may be
// anything, and their difference must not overflow.
inline double trace_us(std::int64_t from_ns, std::int64_t to_ns) {
    return (static_cast<double>(to_ns) - static_cast<double>(from_ns)) / 1000.0;
}

// The earliest time among the GPU tables (INT64_MAX when they hold nothing).
std::int64_t earliest_gpu_time(sqlite3* db);

// Appends to `trace`, timestamps in microseconds after `origin_ns`.
void append_gpu_tracks(sqlite3* db, std::int64_t origin_ns, nlohmann::json& trace,
                       ChromeTraceSummary& summary);

} // namespace kvscope::profiler
