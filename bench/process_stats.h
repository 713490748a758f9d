// What the attach benchmarks read about their own process: its resident
// memory and the calling thread's CPU time.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <time.h>

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

// The calling thread's CPU time in seconds.
inline double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

} // namespace kvscope::bench
