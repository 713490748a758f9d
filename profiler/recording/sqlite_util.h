// The few SQLite C API conveniences the recorder and readers share: errors
// as RecordingError with the statement named, and prepared statements that
// finalise themselves.
#pragma once

#include "profiler/recording/recording.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace kvscope::profiler {

// Throws RecordingError("what: <SQLite's message>") unless rc is OK, ROW or DONE.
void check_sqlite(int rc, sqlite3* db, const std::string& what);
// Runs one or more statements that return no rows.
void exec_sqlite(sqlite3* db, const char* sql, const std::string& what);
bool table_exists(sqlite3* db, const char* table);

// A recording opened read-only and closed when this goes. Throws
// RecordingError with the reason when `path` is not a readable recording.
class ReadOnlyRecording {
public:
    explicit ReadOnlyRecording(const std::filesystem::path& path);
    ~ReadOnlyRecording();
    ReadOnlyRecording(const ReadOnlyRecording&) = delete;
    ReadOnlyRecording& operator=(const ReadOnlyRecording&) = delete;

    sqlite3* db() const { return db_; }

private:
    sqlite3* db_ = nullptr;
};

class Statement {
public:
    Statement(sqlite3* db, const char* sql);
    ~Statement();
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;

    // Binds by position, from 1. Text is copied only when `copy` (else it must
    // outlive the next step()).
    Statement& bind(int index, std::int64_t value);
    Statement& bind(int index, double value);
    Statement& bind(int index, std::string_view text, bool copy = false);
    Statement& bind_null(int index);
    // Steps once and resets for the next use; throws on failure.
    void run(const char* what);
    // Steps once; true while there is a row to read.
    bool next();
    std::int64_t int64(int column) const;
    double real(int column) const;
    std::string text(int column) const;
    bool is_null(int column) const;

    sqlite3_stmt* get() const { return statement_; }

private:
    sqlite3* db_;
    sqlite3_stmt* statement_ = nullptr;
};

} // namespace kvscope::profiler
