// Reads a recording back into a RunStore, the app's replay: every engine
// event in the order it was written, then the GPU kernels (a track per
// device and stream) and NVTX ranges (a track per thread and nesting depth).
#pragma once

#include "profiler/recording.h"
#include "profiler/run_store.h"

#include <filesystem>
#include <functional>
#include <map>
#include <string>

namespace kvscope::profiler {

// Called now and then with the share read so far (0..1); returning false
// cancels the load (load_recording then throws RecordingCancelled).
using LoadProgress = std::function<bool(double)>;

class RecordingCancelled : public RecordingError {
public:
    RecordingCancelled()
        : RecordingError("loading cancelled") {}
};

// Throws RecordingError with the reason when `path` is not a readable
// recording.
void load_recording(const std::filesystem::path& path, RunStore& store,
                    const LoadProgress& progress = {});

// The recording's KVSCOPE_META entries (model, machine, workload, ...).
std::map<std::string, std::string> recording_metadata(const std::filesystem::path& path);

} // namespace kvscope::profiler
