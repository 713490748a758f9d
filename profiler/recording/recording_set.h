// A side of a comparison: one recording, or a folder of repetitions of the
// same workload (what `kvscope gate` writes, or any folder of recordings).
#pragma once

#include "profiler/recording/recording_stats.h"

#include <filesystem>
#include <vector>

namespace kvscope::profiler {

// The recordings of `path`: the file itself, or every file in the folder
// (not its subfolders; SQLite's -wal, -shm and -journal files, and logs, are
// not recordings), in name order. Throws RecordingError naming the file
// that is not a readable recording, or the folder that holds none.
std::vector<std::filesystem::path> recordings_in(const std::filesystem::path& path);

// compute_stats() of each.
std::vector<RecordingStats> compute_run_set_stats(const std::filesystem::path& path);

} // namespace kvscope::profiler
