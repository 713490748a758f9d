// What kvscope does with a recording it is handed, every reader in turn:
// the check `kvscope stats` and the app make first, the app's replay into a
// RunStore (block maps scrubbed at a few moments), the metadata, `kvscope
// stats` and `kvscope export`. The contract: RecordingError with the reason,
// nothing else, whatever the file holds.
#pragma once

#include "profiler/export/chrome_trace.h"
#include "profiler/recording/recording.h"
#include "profiler/recording/recording_reader.h"
#include "profiler/recording/recording_stats.h"
#include "profiler/store/run_store.h"

#include <filesystem>
#include <ostream>
#include <streambuf>

namespace kvscope::fuzz {

// Swallows what it is given: export's output is not the point here.
class NullBuffer : public std::streambuf {
protected:
    int overflow(int c) override { return c; }
    std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

inline void read_recording(const std::filesystem::path& path) {
    (void)profiler::recording_problem(path);
    try {
        profiler::RunStore store;
        profiler::load_recording(path, store);
        // Unsigned, so hostile times wrap instead of overflowing here.
        const auto begin = static_cast<std::uint64_t>(store.start_ns());
        const auto span = static_cast<std::uint64_t>(store.end_ns()) - begin;
        for (std::uint64_t i = 0; i <= 4; ++i) {
            (void)store.block_map_at(static_cast<std::int64_t>(begin + span / 4 * i));
        }
    } catch (const profiler::RecordingError&) {
    }
    try {
        (void)profiler::recording_metadata(path);
    } catch (const profiler::RecordingError&) {
    }
    try {
        (void)profiler::compute_stats(path);
    } catch (const profiler::RecordingError&) {
    }
    try {
        NullBuffer nothing;
        std::ostream out(&nothing);
        (void)profiler::export_chrome_trace(path, out);
    } catch (const profiler::RecordingError&) {
    }
}

} // namespace kvscope::fuzz
