// Writes engine events and GPU activity into a recording as they happen.
// on_event() and on_gpu_activity() only queue (the engine's thread never
// waits on the disk); a writer thread of its own commits the queue in one
// transaction every kRecorderCommitInterval, in WAL mode, so a run killed at
// any moment leaves a file that opens with everything up to its last commit:
// it loses at most the last interval or so of events.
//
// The queue is bounded: a producer faster than SQLite for long (an attached
// stream of hundreds of thousands of rows a second on a slow disk) waits in
// on_event() for the next commit once kRecorderMaxQueuedEvents are queued,
// rather than the queue growing without limit. Back-pressure, not dropping:
// the recording stays whole and equal to what the producer saw, and the wait
// lands where it can be afforded. `kvscope attach`'s loop then reads its
// sockets later, ZeroMQ's high-water marks drop what does not fit at the
// publishers (which never wait), and the sources count those as lost. Only a
// writer that failed (close() reports why) makes on_event() drop, counted.
//
// A failed write (a full disk, a file-size limit) rolls back its commit and
// stops the writer: the file keeps every commit before it, and failed() says
// so at once, for callers that stop their run then. So does a file deleted,
// moved or replaced under the running recording, noticed at the next commit
// (what was written is where the file went, or gone with it). Anything queued
// after the writer stopped is dropped and counted.
#pragma once

#include "engine/events/engine_event.h"
#include "profiler/gpu/gpu_activity.h"
#include "profiler/recording/recording.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct sqlite3;

namespace kvscope::profiler {

inline constexpr std::chrono::milliseconds kRecorderCommitInterval{100};
// About 80 MiB of attached-block rows, ~1 s of an 8-publisher stream at
// 100,000 KV events a second; an engine run never comes near it.
inline constexpr std::size_t kRecorderMaxQueuedEvents = std::size_t{1} << 18;

struct RecorderStats {
    std::int64_t events = 0;              // engine events written
    std::int64_t gpu_records = 0;         // kernels, copies, memsets, memory, NVTX, overhead
    std::int64_t dropped_gpu_records = 0; // lost by CUPTI before they reached us
    std::int64_t commits = 0;
    std::int64_t max_queued_events = 0; // the most engine events ever waiting for the writer
    std::int64_t full_waits = 0;        // on_event() calls that waited for room
    std::int64_t full_wait_ns = 0;      // time they waited, together
    std::int64_t dropped_events = 0;    // queued after the writer failed: never written
};

class NsightTableWriter;
class Statement;

class Recorder final : public events::EventSink, public GpuActivitySink {
public:
    // Creates a new recording at `path`; throws RecordingError when the file
    // exists (unless `overwrite`) or cannot be written. `metadata` goes into
    // KVSCOPE_META next to the schema version.
    Recorder(const std::filesystem::path& path, const std::map<std::string, std::string>& metadata,
             bool overwrite = false, std::size_t max_queued_events = kRecorderMaxQueuedEvents);
    ~Recorder() override; // close()s

    void on_event(const events::EngineEvent& event) override;
    // Takes the events (one lock, no copies); waits for room as on_event()
    // does, the batch counting as one arrival.
    void on_events(std::vector<events::EngineEvent>&& events) override;
    void on_gpu_activity(GpuActivityBatch batch) override;
    // The GPUs of this machine, for TARGET_INFO_GPU.
    void set_gpu_devices(std::vector<GpuDevice> devices);
    // Adds or replaces a metadata entry (written with the next commit).
    void set_metadata(const std::string& key, const std::string& value);

    // Writes what is queued, stops the writer and closes the file.
    // Idempotent; throws RecordingError if the last commit failed.
    void close();

    RecorderStats stats() const;
    // Whether the writer has failed: nothing more will be written. error()
    // says why, naming the file.
    bool failed() const;
    std::string error() const;
    // Engine events queued and not yet handed to the writer.
    std::size_t queued_events() const;

private:
    void writer_loop();
    // Waits while the queue is full (the writer still running); false when
    // the writer is done and nothing queued now will be written.
    bool wait_for_room(std::unique_lock<std::mutex>& lock);
    struct Pending {
        std::vector<events::EngineEvent> events;
        GpuActivityBatch gpu;
        std::vector<GpuDevice> devices;
        std::vector<std::pair<std::string, std::string>> metadata;
        bool empty() const;
    };
    void commit(Pending& pending);
    void write_events(const std::vector<events::EngineEvent>& events);

    // Whether path_ still names the file being written (SQLite compares its
    // open file with the path).
    bool file_is_at_path() const;

    std::filesystem::path path_;
    sqlite3* db_ = nullptr;
    // Used by the writer thread only:
    std::unique_ptr<NsightTableWriter> nsight_;
    std::unique_ptr<Statement> insert_many_;
    std::unique_ptr<Statement> insert_one_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable room_; // the writer took the queue
    Pending queue_;
    std::size_t max_queued_;
    bool stopping_ = false;
    bool writer_done_ = false; // the writer thread returned (failed or stopped)
    bool moved_ = false;       // the file left path_ (writer thread, then close())
    std::string error_;
    RecorderStats stats_;
    std::thread writer_;
};

} // namespace kvscope::profiler
