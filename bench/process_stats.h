// What the attach benchmarks read about their own process: its resident
// memory and the calling thread's CPU time.
#pragma once

#include "engine/util/cpu_clock.h"

#include <cstdint>
#include <fstream>
#include <string>

namespace kvscope::bench {

// The process's resident set (VmRSS) in KiB; -1 when it cannot be read.
inline std::int64_t rss_kib() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) {
            return std::stoll(line.substr(6));
        }
    }
    return -1;
}

// The calling thread's CPU time in seconds (the engine's clock for it).
inline double thread_cpu_seconds() {
    return static_cast<double>(thread_cpu_ns()) * 1e-9;
}

} // namespace kvscope::bench
