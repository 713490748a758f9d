// Reads a recording back into a RunStore, the app's replay: every engine
// event in the order it was written, then the GPU kernels (a track per
// device and stream) and NVTX ranges (a track per thread and nesting depth).
#pragma once

#include "profiler/recording/recording.h"
#include "profiler/store/run_store.h"

#include <cstdint>
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

// A replay holds every event in memory: about kReplayBytesPerEvent each
// (measured 2026-11-24: 506k events of a tiny-model run took 58 MB in
// kvscope-ui, 115 B each; rounded up for what the views derive).
inline constexpr std::int64_t kReplayBytesPerEvent = 160;

// The most events a replay takes on this machine: half its memory's worth.
std::int64_t replay_event_budget();

// Throws RecordingError with the reason when `path` is not a readable
// recording, or holds more than `max_events` events (said before reading when
// its row ids say so, else as soon as reading passes the budget): memory stays
// bounded, and the message points to the commands that stream instead.
void load_recording(const std::filesystem::path& path, RunStore& store,
                    const LoadProgress& progress = {},
                    std::int64_t max_events = replay_event_budget());

// The recording's KVSCOPE_META entries (model, machine, workload, ...).
std::map<std::string, std::string> recording_metadata(const std::filesystem::path& path);

} // namespace kvscope::profiler
