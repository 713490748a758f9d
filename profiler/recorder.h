// Writes engine events into a recording as they happen. on_event() only
// queues (the engine's thread never waits on the disk); a writer thread of
// its own commits the queue in one transaction at least every 100 ms, in WAL
// mode, so a run killed at any moment leaves a file that opens with
// everything up to its last commit.
#pragma once

#include "engine/events/engine_event.h"
#include "profiler/recording.h"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct sqlite3;

namespace kvscope::profiler {

struct RecorderStats {
    std::int64_t events = 0;
    std::int64_t commits = 0;
};

class Recorder final : public events::EventSink {
public:
    // Creates a new recording at `path`; throws RecordingError when the file
    // exists (unless `overwrite`) or cannot be written. `metadata` goes into
    // KVSCOPE_META next to the schema version.
    Recorder(const std::filesystem::path& path, const std::map<std::string, std::string>& metadata,
             bool overwrite = false);
    ~Recorder() override; // close()s

    void on_event(const events::EngineEvent& event) override;
    // Adds or replaces a metadata entry (written with the next commit).
    void set_metadata(const std::string& key, const std::string& value);

    // Writes what is queued, stops the writer and closes the file.
    // Idempotent; throws RecordingError if the last commit failed.
    void close();

    RecorderStats stats() const;

private:
    void writer_loop();
    void commit(std::vector<events::EngineEvent>& events,
                std::vector<std::pair<std::string, std::string>>& metadata);

    sqlite3* db_ = nullptr;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<events::EngineEvent> queue_;
    std::vector<std::pair<std::string, std::string>> metadata_queue_;
    bool stopping_ = false;
    std::string error_;
    RecorderStats stats_;
    std::thread writer_;
};

} // namespace kvscope::profiler
