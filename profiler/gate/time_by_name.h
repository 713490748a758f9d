// Time by name, in the manner of nsys stats' kernel and NVTX summaries: for
// each CPU op, GPU kernel, GPU copy/memset and NVTX range, how often it ran,
// its total share and the spread of its durations.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

struct sqlite3;

namespace kvscope::profiler {

struct NamedDurations {
    std::string name;
    std::int64_t instances = 0;
    std::int64_t total_ns = 0;
    double percent = 0; // of the total over all names in the same summary
    double mean_ns = 0;
    double median_ns = 0;
    std::int64_t min_ns = 0;
    std::int64_t max_ns = 0;
    double stddev_ns = 0;
};

struct TimeSummaries {
    std::vector<NamedDurations> cpu_ops;        // CPU backend op slices
    std::vector<NamedDurations> gpu_kernels;    // by kernel short name
    std::vector<NamedDurations> gpu_memory_ops; // "[CUDA memcpy HtoD]", "[CUDA memset]"
    std::vector<NamedDurations> nvtx_ranges;    // "domain:text"
    std::int64_t dropped_gpu_records = 0;
};

// Reads an open recording; tables a recording lacks (CPU runs, schema 1)
// leave their summary empty.
TimeSummaries summarise_time_by_name(sqlite3* db);

// Summarises rows of (name, duration in ns) that `sql` selects, largest total
// first.
std::vector<NamedDurations> time_by_name(sqlite3* db, const char* sql);

// Summarises durations (ns) grouped by name, largest total first: what
// time_by_name() does with its rows, for spans already in memory (the app's
// live views).
std::vector<NamedDurations>
summarise_durations(std::map<std::string, std::vector<std::int64_t>> by_name);

} // namespace kvscope::profiler
