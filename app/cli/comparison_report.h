// What `kvscope compare` and `kvscope gate` print: the metric table (or its
// JSON), the criteria, and the verdict; the exit status the gate returns.
#pragma once

#include "profiler/gate/compare.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <vector>

namespace kvscope::cli {

struct ComparisonFlags;

// Reads both sides (a recording or a folder of them each) and prints their
// comparison under the names given; exit_failure when a metric regressed,
// exit_ok otherwise.
int report_comparison(const std::string& base_name, const std::filesystem::path& base_path,
                      const std::string& new_name, const std::filesystem::path& new_path,
                      ComparisonFlags& flags);

// The options both commands take, in the same words.
struct ComparisonFlags {
    profiler::CompareOptions options;
    double threshold_percent = 10;
    double robust_threshold_percent = 2;
    bool json = false;
    // Into options, once parsed.
    const profiler::CompareOptions& resolved();
};
void add_comparison_flags(CLI::App& parser, ComparisonFlags& flags);

} // namespace kvscope::cli
