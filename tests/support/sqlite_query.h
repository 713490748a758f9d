// One value from an SQLite file, for tests that look into recordings
// (also while a writer has them open: read-only, WAL-aware).
#pragma once

#include <cstdint>
#include <optional>
#include <sqlite3.h>
#include <string>

namespace kvscope::test {

// The first column of the first row `sql` selects from the file at `path`,
// or -1 when it cannot be opened or the query fails.
inline std::int64_t query_int(const std::string& path, const char* sql) {
    sqlite3* db = nullptr;
    std::int64_t value = -1;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* statement = nullptr;
        if (sqlite3_prepare_v2(db, sql, -1, &statement, nullptr) == SQLITE_OK &&
            sqlite3_step(statement) == SQLITE_ROW) {
            value = sqlite3_column_int64(statement, 0);
        }
        sqlite3_finalize(statement);
    }
    sqlite3_close(db);
    return value;
}

// The first column of the first row as text ("" for NULL), or nullopt when
// the file cannot be opened or the query fails.
inline std::optional<std::string> query_text(const std::string& path, const char* sql) {
    sqlite3* db = nullptr;
    std::optional<std::string> value;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* statement = nullptr;
        if (sqlite3_prepare_v2(db, sql, -1, &statement, nullptr) == SQLITE_OK &&
            sqlite3_step(statement) == SQLITE_ROW) {
            const auto* text = sqlite3_column_text(statement, 0);
            value = text ? reinterpret_cast<const char*>(text) : "";
        }
        sqlite3_finalize(statement);
    }
    sqlite3_close(db);
    return value;
}

} // namespace kvscope::test
