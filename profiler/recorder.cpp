#include "profiler/recorder.h"

#include <chrono>
#include <sqlite3.h>

namespace kvscope::profiler {
namespace {

constexpr auto kCommitInterval = std::chrono::milliseconds(100);

constexpr const char* kSchema = R"sql(
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE KVSCOPE_META (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ENUM_KVSCOPE_EVENT_KIND (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
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
CREATE INDEX KVSCOPE_EVENTS_TIME ON KVSCOPE_EVENTS (t_ns);
CREATE INDEX KVSCOPE_EVENTS_KIND_TIME ON KVSCOPE_EVENTS (kind, t_ns);
CREATE INDEX KVSCOPE_EVENTS_REQUEST ON KVSCOPE_EVENTS (request) WHERE request IS NOT NULL;
)sql";

void check(int rc, sqlite3* db, const std::string& what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        throw RecordingError(what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    }
}

void exec(sqlite3* db, const char* sql, const std::string& what) {
    char* message = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
        const std::string text = message ? message : "unknown error";
        sqlite3_free(message);
        throw RecordingError(what + ": " + text);
    }
}

// A prepared statement, finalised on scope exit.
struct Statement {
    sqlite3_stmt* s = nullptr;
    Statement(sqlite3* db, const char* sql) {
        check(sqlite3_prepare_v2(db, sql, -1, &s, nullptr), db, sql);
    }
    ~Statement() { sqlite3_finalize(s); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
};

} // namespace

Recorder::Recorder(const std::filesystem::path& path,
                   const std::map<std::string, std::string>& metadata, bool overwrite) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
        if (!overwrite) {
            throw RecordingError(path.string() + " exists; choose another file or remove it");
        }
        for (const char* suffix : {"", "-wal", "-shm"}) {
            std::filesystem::remove(path.string() + suffix, ec);
        }
    }
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK) {
        const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
        sqlite3_close(db_);
        db_ = nullptr;
        throw RecordingError("cannot create " + path.string() + ": " + why);
    }
    try {
        exec(db_, kSchema, "creating " + path.string());
        exec(db_, "BEGIN", "creating the recording");
        {
            Statement kind(db_, "INSERT INTO ENUM_KVSCOPE_EVENT_KIND (id, name) VALUES (?, ?)");
            for (int k = 0; k < events::kEventKindCount; ++k) {
                const std::string_view name =
                    events::event_kind_name(static_cast<events::EventKind>(k));
                sqlite3_bind_int(kind.s, 1, k);
                sqlite3_bind_text(kind.s, 2, name.data(), static_cast<int>(name.size()),
                                  SQLITE_TRANSIENT);
                check(sqlite3_step(kind.s), db_, "writing the event kinds");
                sqlite3_reset(kind.s);
            }
            Statement meta(db_, "INSERT OR REPLACE INTO KVSCOPE_META (key, value) VALUES (?, ?)");
            std::map<std::string, std::string> all = metadata;
            all["schema_version"] = std::to_string(kRecordingSchemaVersion);
            all["format"] = "kvscope recording";
            for (const auto& [key, value] : all) {
                sqlite3_bind_text(meta.s, 1, key.c_str(), -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(meta.s, 2, value.c_str(), -1, SQLITE_TRANSIENT);
                check(sqlite3_step(meta.s), db_, "writing the metadata");
                sqlite3_reset(meta.s);
            }
        }
        exec(db_, "COMMIT", "creating the recording");
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

void Recorder::on_event(const events::EngineEvent& event) {
    std::lock_guard lock(mutex_);
    queue_.push_back(event);
}

void Recorder::set_metadata(const std::string& key, const std::string& value) {
    std::lock_guard lock(mutex_);
    metadata_queue_.emplace_back(key, value);
}

RecorderStats Recorder::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

void Recorder::commit(std::vector<events::EngineEvent>& events,
                      std::vector<std::pair<std::string, std::string>>& metadata) {
    if (events.empty() && metadata.empty()) {
        return;
    }
    exec(db_, "BEGIN", "recording");
    {
        Statement insert(db_, "INSERT INTO KVSCOPE_EVENTS (t_ns, kind, request, block, a, b, c, "
                              "d, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
        for (const events::EngineEvent& e : events) {
            sqlite3_bind_int64(insert.s, 1, e.time_ns);
            sqlite3_bind_int(insert.s, 2, static_cast<int>(e.kind));
            if (e.request >= 0) {
                sqlite3_bind_int64(insert.s, 3, e.request);
            } else {
                sqlite3_bind_null(insert.s, 3);
            }
            if (e.block >= 0) {
                sqlite3_bind_int(insert.s, 4, e.block);
            } else {
                sqlite3_bind_null(insert.s, 4);
            }
            sqlite3_bind_int64(insert.s, 5, e.a);
            sqlite3_bind_int64(insert.s, 6, e.b);
            sqlite3_bind_int64(insert.s, 7, e.c);
            sqlite3_bind_int64(insert.s, 8, e.d);
            if (e.text.empty()) {
                sqlite3_bind_null(insert.s, 9);
            } else {
                sqlite3_bind_text(insert.s, 9, e.text.c_str(), static_cast<int>(e.text.size()),
                                  SQLITE_STATIC);
            }
            check(sqlite3_step(insert.s), db_, "recording an event");
            sqlite3_reset(insert.s);
        }
        Statement meta(db_, "INSERT OR REPLACE INTO KVSCOPE_META (key, value) VALUES (?, ?)");
        for (const auto& [key, value] : metadata) {
            sqlite3_bind_text(meta.s, 1, key.c_str(), -1, SQLITE_STATIC);
            sqlite3_bind_text(meta.s, 2, value.c_str(), -1, SQLITE_STATIC);
            check(sqlite3_step(meta.s), db_, "recording metadata");
            sqlite3_reset(meta.s);
        }
    }
    exec(db_, "COMMIT", "recording");
    std::lock_guard lock(mutex_);
    stats_.events += static_cast<std::int64_t>(events.size());
    ++stats_.commits;
}

void Recorder::writer_loop() {
    std::vector<events::EngineEvent> events;
    std::vector<std::pair<std::string, std::string>> metadata;
    for (;;) {
        bool stopping;
        {
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, kCommitInterval, [this] { return stopping_; });
            events.swap(queue_);
            metadata.swap(metadata_queue_);
            stopping = stopping_;
        }
        try {
            commit(events, metadata);
        } catch (const RecordingError& e) {
            std::lock_guard lock(mutex_);
            error_ = e.what();
            return; // the engine goes on; close() reports it
        }
        events.clear();
        metadata.clear();
        if (stopping) {
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
    // Fold the WAL into the main file so the recording is one file again.
    sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
    exec(db_, "PRAGMA journal_mode = DELETE", "closing the recording");
    sqlite3_close(db_);
    db_ = nullptr;
    if (!error_.empty()) {
        throw RecordingError(error_);
    }
}

} // namespace kvscope::profiler
