// A kvscope recording: one SQLite file per run. KV-cache data lives in
// tables prefixed KVSCOPE_ (docs/recordings.md); CUDA and NVTX data, when a
// GPU run adds them, use the Nsight Systems export's table names.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace kvscope::profiler {

// Bumped on any change a reader of the previous version would misread.
inline constexpr int kRecordingSchemaVersion = 2;

class RecordingError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Why `path` cannot be read as a recording (not SQLite, not a kvscope
// recording, truncated, or written by a newer kvscope); empty when it can.
std::string recording_problem(const std::filesystem::path& path);

} // namespace kvscope::profiler
