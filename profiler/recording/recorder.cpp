#include "profiler/recording/recorder.h"

#include "profiler/gpu/nsight_tables.h"
#include "profiler/recording/recording_views.h"
#include "profiler/recording/sqlite_util.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <iterator>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>

namespace kvscope::profiler {
namespace {

constexpr const char* kInsertEvents =
    "INSERT INTO KVSCOPE_EVENTS (t_ns, kind, request, block, a, b, c, d, text) VALUES ";
constexpr const char* kEventRow = "(?, ?, ?, ?, ?, ?, ?, ?, ?)";
constexpr int kEventColumns = 9;
constexpr int kRowsPerInsert = 64; // 576 parameters, under SQLite's limit of 999 in old builds

constexpr const char* kSchema = R"sql(
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA cache_size = -65536;
PRAGMA wal_autocheckpoint = 16384;
CREATE TABLE KVSCOPE_META (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ENUM_KVSCOPE_EVENT_KIND (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
-- Rows arrive in time order (the engine stamps them as it emits them), so id
-- order is time order, also in a recording killed before close() built the
-- indexes.
CREATE TABLE KVSCOPE_EVENTS (
    id INTEGER PRIMARY KEY,
    t_ns INTEGER NOT NULL,
    kind INTEGER NOT NULL REFERENCES ENUM_KVSCOPE_EVENT_KIND(id),
    request INTEGER,
    block INTEGER,
    a INTEGER NOT NULL DEFAULT 0,
    b INTEGER NOT NULL DEFAULT 0,
    c INTEGER NOT NULL DEFAULT 0,
    d INTEGER NOT NULL DEFAULT 0,
    text TEXT
);
)sql";

// Secondary indexes cost the writer two thirds of its speed when kept up to
// date row by row, so they are built once, when the recording closes.
constexpr const char* kIndexes = R"sql(
CREATE INDEX IF NOT EXISTS KVSCOPE_EVENTS_TIME ON KVSCOPE_EVENTS (t_ns);
CREATE INDEX IF NOT EXISTS KVSCOPE_EVENTS_KIND_TIME ON KVSCOPE_EVENTS (kind, t_ns);
CREATE INDEX IF NOT EXISTS KVSCOPE_EVENTS_REQUEST ON KVSCOPE_EVENTS (request)
    WHERE request IS NOT NULL;
)sql";

// A write past the process's file-size limit (ulimit -f) raises SIGXFSZ,
// whose default kills the process mid-write. Ignored, the write fails with
// EFBIG instead, which the recorder handles as it does a full disk: the
// run goes on or stops as its caller chose, with a message. Process-wide, but
// nothing in kvscope wants to die of it.
void fail_writes_past_file_size_limit() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction current {};
        if (sigaction(SIGXFSZ, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
            std::signal(SIGXFSZ, SIG_IGN); // a program's own choice stays
        }
    });
}

} // namespace

Recorder::Recorder(const std::filesystem::path& path,
                   const std::map<std::string, std::string>& metadata, bool overwrite,
                   std::size_t max_queued_events)
    : path_(path)
    , max_queued_(std::max<std::size_t>(max_queued_events, 1)) {
    fail_writes_past_file_size_limit();
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
        if (!overwrite) {
            throw RecordingError(path.string() + " exists; choose another file or remove it");
        }
        for (const char* suffix : {"", "-wal", "-shm"}) {
            std::filesystem::remove(path.string() + suffix, ec);
        }
    }
    if (sqlite3_open_v2(path.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
        const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
        sqlite3_close(db_);
        db_ = nullptr;
        throw RecordingError("cannot create " + path.string() + ": " + why);
    }
    try {
        exec_sqlite(db_, kSchema, "creating " + path.string());
        exec_sqlite(db_, "BEGIN", "creating the recording");
        create_nsight_tables(db_);
        create_recording_views(db_);
        {
            Statement kind(db_, "INSERT INTO ENUM_KVSCOPE_EVENT_KIND (id, name) VALUES (?, ?)");
            for (int k = 0; k < events::kEventKindCount; ++k) {
                kind.bind(1, std::int64_t{k})
                    .bind(2, events::event_kind_name(static_cast<events::EventKind>(k)));
                kind.run("writing the event kinds");
            }
            Statement meta(db_, "INSERT OR REPLACE INTO KVSCOPE_META (key, value) VALUES (?, ?)");
            std::map<std::string, std::string> all = metadata;
            all["schema_version"] = std::to_string(kRecordingSchemaVersion);
            all["format"] = "kvscope recording";
            for (const auto& [key, value] : all) {
                meta.bind(1, key).bind(2, value);
                meta.run("writing the metadata");
            }
        }
        exec_sqlite(db_, "COMMIT", "creating the recording");
        nsight_ = std::make_unique<NsightTableWriter>(db_);
    } catch (...) {
        sqlite3_close(db_);
        db_ = nullptr;
        throw;
    }
    writer_ = std::thread([this] { writer_loop(); });
}

Recorder::~Recorder() {
    try {
        close();
    } catch (...) { // a destructor cannot report; close() callers see the error
    }
}

bool Recorder::Pending::empty() const {
    return events.empty() && gpu.size() == 0 && gpu.dropped_records == 0 && devices.empty() &&
           metadata.empty();
}

bool Recorder::wait_for_room(std::unique_lock<std::mutex>& lock) {
    if (queue_.events.size() >= max_queued_ && !writer_done_) {
        // Full: have the writer commit now rather than at its next interval,
        // and wait until it has taken the queue.
        const auto start = std::chrono::steady_clock::now();
        wake_.notify_one();
        room_.wait(lock, [this] { return queue_.events.size() < max_queued_ || writer_done_; });
        ++stats_.full_waits;
        stats_.full_wait_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - start)
                                   .count();
    }
    return !writer_done_;
}

void Recorder::on_event(const events::EngineEvent& event) {
    std::unique_lock lock(mutex_);
    if (!wait_for_room(lock)) {
        ++stats_.dropped_events; // nothing will ever write it
        return;
    }
    queue_.events.push_back(event);
    stats_.max_queued_events =
        std::max(stats_.max_queued_events, static_cast<std::int64_t>(queue_.events.size()));
}

void Recorder::on_events(std::vector<events::EngineEvent>&& events) {
    std::unique_lock lock(mutex_);
    if (!wait_for_room(lock)) {
        stats_.dropped_events += static_cast<std::int64_t>(events.size());
        events.clear();
        return;
    }
    if (queue_.events.empty()) {
        queue_.events.swap(events);
    } else {
        queue_.events.insert(queue_.events.end(), std::make_move_iterator(events.begin()),
                             std::make_move_iterator(events.end()));
    }
    events.clear();
    stats_.max_queued_events =
        std::max(stats_.max_queued_events, static_cast<std::int64_t>(queue_.events.size()));
}

std::size_t Recorder::queued_events() const {
    std::lock_guard lock(mutex_);
    return queue_.events.size();
}

void Recorder::on_gpu_activity(GpuActivityBatch batch) {
    std::lock_guard lock(mutex_);
    if (writer_done_) { // nothing will write it: drop, as on_event() does
        stats_.dropped_gpu_records += static_cast<std::int64_t>(batch.size());
        return;
    }
    queue_.gpu.append(std::move(batch));
}

void Recorder::set_gpu_devices(std::vector<GpuDevice> devices) {
    std::lock_guard lock(mutex_);
    queue_.devices = std::move(devices);
}

void Recorder::set_metadata(const std::string& key, const std::string& value) {
    std::lock_guard lock(mutex_);
    queue_.metadata.emplace_back(key, value);
}

RecorderStats Recorder::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

bool Recorder::failed() const {
    std::lock_guard lock(mutex_);
    return !error_.empty();
}

std::string Recorder::error() const {
    std::lock_guard lock(mutex_);
    return error_;
}

bool Recorder::file_is_at_path() const {
    int moved = 0;
    sqlite3_file_control(db_, "main", SQLITE_FCNTL_HAS_MOVED, &moved);
    return moved == 0;
}

void Recorder::write_events(const std::vector<events::EngineEvent>& events) {
    // Many rows per INSERT: SQLite's per-statement cost, not the B-tree,
    // dominates single-row inserts of rows this small.
    if (!insert_many_) {
        std::string sql = kInsertEvents;
        for (int r = 0; r < kRowsPerInsert; ++r) {
            sql += r == 0 ? kEventRow : std::string(",") + kEventRow;
        }
        insert_many_ = std::make_unique<Statement>(db_, sql.c_str());
        insert_one_ =
            std::make_unique<Statement>(db_, (std::string(kInsertEvents) + kEventRow).c_str());
    }
    const auto bind = [](Statement& s, int base, const events::EngineEvent& e) {
        s.bind(base + 1, e.time_ns).bind(base + 2, std::int64_t{static_cast<int>(e.kind)});
        if (e.request >= 0) {
            s.bind(base + 3, e.request);
        } else {
            s.bind_null(base + 3);
        }
        if (e.block >= 0) {
            s.bind(base + 4, std::int64_t{e.block});
        } else {
            s.bind_null(base + 4);
        }
        s.bind(base + 5, e.a).bind(base + 6, e.b).bind(base + 7, e.c).bind(base + 8, e.d);
        if (e.text.empty()) {
            s.bind_null(base + 9);
        } else {
            s.bind(base + 9, e.text);
        }
    };
    std::size_t i = 0;
    for (; i + kRowsPerInsert <= events.size(); i += kRowsPerInsert) {
        for (int r = 0; r < kRowsPerInsert; ++r) {
            bind(*insert_many_, r * kEventColumns, events[i + static_cast<std::size_t>(r)]);
        }
        insert_many_->run("recording events");
    }
    for (; i < events.size(); ++i) {
        bind(*insert_one_, 0, events[i]);
        insert_one_->run("recording an event");
    }
}

void Recorder::commit(Pending& pending) {
    if (pending.empty()) {
        return;
    }
    if (!file_is_at_path()) {
        moved_ = true;
        throw RecordingError(path_.string() +
                             " was deleted, moved or replaced while recording: what was written "
                             "is where the file went, or gone with it");
    }
    exec_sqlite(db_, "BEGIN", "recording");
    {
        write_events(pending.events);
        nsight_->write(pending.gpu);
        if (!pending.devices.empty()) {
            nsight_->write_devices(pending.devices);
        }
        std::int64_t dropped = 0;
        {
            std::lock_guard lock(mutex_);
            dropped =
                stats_.dropped_gpu_records + static_cast<std::int64_t>(pending.gpu.dropped_records);
        }
        if (pending.gpu.dropped_records > 0) {
            pending.metadata.emplace_back("cupti_dropped_records", std::to_string(dropped));
        }
        Statement meta(db_, "INSERT OR REPLACE INTO KVSCOPE_META (key, value) VALUES (?, ?)");
        for (const auto& [key, value] : pending.metadata) {
            meta.bind(1, key).bind(2, value);
            meta.run("recording metadata");
        }
    }
    exec_sqlite(db_, "COMMIT", "recording");
    std::lock_guard lock(mutex_);
    stats_.events += static_cast<std::int64_t>(pending.events.size());
    stats_.gpu_records += static_cast<std::int64_t>(pending.gpu.size());
    stats_.dropped_gpu_records += static_cast<std::int64_t>(pending.gpu.dropped_records);
    ++stats_.commits;
}

void Recorder::writer_loop() {
    // The engine's threads come first. On a machine with as many compute
    // threads as cores, a writer that preempts one of them on waking makes
    // the whole step wait for that straggler (3-5% of decode throughput on
    // 2 cores). SCHED_BATCH turns off that wake-up preemption but keeps a
    // normal thread's share of the CPU, so under full load the writer still
    // commits on time (a lowest-priority writer starved there).
    sched_param batch{};
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &batch);
    Pending pending;
    for (;;) {
        bool stopping;
        {
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, kRecorderCommitInterval,
                           [this] { return stopping_ || queue_.events.size() >= max_queued_; });
            std::swap(pending, queue_);
            stopping = stopping_;
        }
        room_.notify_all();
        try {
            commit(pending);
        } catch (const RecordingError& e) {
            // Back to the last commit, which the file keeps (a failed
            // statement may have left the transaction open).
            if (!sqlite3_get_autocommit(db_)) {
                sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
            }
            {
                std::lock_guard lock(mutex_);
                error_ = moved_ ? std::string(e.what())
                                : "writing " + path_.string() + " failed: " + e.what() +
                                      " (it keeps the " + std::to_string(stats_.events) +
                                      " events of the " + std::to_string(stats_.commits) +
                                      " commits before)";
                writer_done_ = true;
            }
            room_.notify_all();
            return; // the caller sees failed(); close() reports it
        }
        pending = Pending{};
        if (stopping) {
            std::lock_guard lock(mutex_);
            writer_done_ = true;
            return;
        }
    }
}

void Recorder::close() {
    if (db_ == nullptr) {
        return;
    }
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (writer_.joinable()) {
        writer_.join();
    }
    // Statements must be finalised before the file closes.
    nsight_.reset();
    insert_many_.reset();
    insert_one_.reset();
    std::string error = this->error(); // the writer's, if it failed
    if (error.empty()) {
        try {
            exec_sqlite(db_, kIndexes, "indexing the recording");
            create_nsight_indexes(db_);
        } catch (const RecordingError& e) {
            error = "writing " + path_.string() + " failed: " + e.what() +
                    " (every event is in it, without the indexes that speed up reading)";
        }
    }
    if (moved_ || !file_is_at_path()) {
        // Leaving WAL mode deletes PATH-wal by name, which may be another
        // recording's now: the file is closed as it is.
        if (error.empty()) {
            error = path_.string() +
                    " was deleted, moved or replaced while recording: its last commits are where "
                    "the file went, with the -wal beside it";
        }
    } else {
        // Fold the WAL into the main file so the recording is one file
        // again. On a full disk this fails and the WAL stays beside the file,
        // which SQLite reads as part of it.
        const int folded =
            sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
        const int single = folded == SQLITE_OK ? sqlite3_exec(db_, "PRAGMA journal_mode = DELETE",
                                                              nullptr, nullptr, nullptr)
                                               : folded;
        if (single != SQLITE_OK && error.empty()) {
            error = "folding " + path_.string() + "-wal into " + path_.string() +
                    " failed: " + sqlite3_errmsg(db_) +
                    "; the recording is whole in the two files: keep them together";
        }
    }
    sqlite3_close(db_);
    db_ = nullptr;
    {
        std::lock_guard lock(mutex_);
        error_ = error;
    }
    if (!error.empty()) {
        throw RecordingError(error);
    }
}

} // namespace kvscope::profiler
