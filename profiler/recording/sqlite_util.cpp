#include "profiler/recording/sqlite_util.h"

#include <sqlite3.h>

namespace kvscope::profiler {

void check_sqlite(int rc, sqlite3* db, const std::string& what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        throw RecordingError(what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    }
}

void exec_sqlite(sqlite3* db, const char* sql, const std::string& what) {
    char* message = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
        const std::string text = message ? message : "unknown error";
        sqlite3_free(message);
        throw RecordingError(what + ": " + text);
    }
}

bool table_exists(sqlite3* db, const char* table) {
    Statement s(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
    s.bind(1, std::string_view(table));
    return s.next();
}

ReadOnlyRecording::ReadOnlyRecording(const std::filesystem::path& path) {
    if (const std::string problem = recording_problem(path); !problem.empty()) {
        throw RecordingError(problem);
    }
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        sqlite3_close(db_);
        throw RecordingError(path.string() + ": cannot be opened");
    }
}

ReadOnlyRecording::~ReadOnlyRecording() {
    sqlite3_close(db_);
}

Statement::Statement(sqlite3* db, const char* sql)
    : db_(db) {
    check_sqlite(sqlite3_prepare_v2(db, sql, -1, &statement_, nullptr), db, sql);
}

Statement::~Statement() {
    sqlite3_finalize(statement_);
}

Statement& Statement::bind(int index, std::int64_t value) {
    sqlite3_bind_int64(statement_, index, value);
    return *this;
}

Statement& Statement::bind(int index, double value) {
    sqlite3_bind_double(statement_, index, value);
    return *this;
}

Statement& Statement::bind(int index, std::string_view text, bool copy) {
    sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()),
                      copy ? SQLITE_TRANSIENT : SQLITE_STATIC);
    return *this;
}

Statement& Statement::bind_null(int index) {
    sqlite3_bind_null(statement_, index);
    return *this;
}

void Statement::run(const char* what) {
    const int rc = sqlite3_step(statement_);
    sqlite3_reset(statement_);
    check_sqlite(rc, db_, what);
}

bool Statement::next() {
    const int rc = sqlite3_step(statement_);
    if (rc == SQLITE_ROW) {
        return true;
    }
    check_sqlite(rc, db_, sqlite3_sql(statement_));
    return false;
}

std::int64_t Statement::int64(int column) const {
    return sqlite3_column_int64(statement_, column);
}

double Statement::real(int column) const {
    return sqlite3_column_double(statement_, column);
}

std::string Statement::text(int column) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(statement_, column));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(statement_, column)))
             : std::string();
}

bool Statement::is_null(int column) const {
    return sqlite3_column_type(statement_, column) == SQLITE_NULL;
}

} // namespace kvscope::profiler
