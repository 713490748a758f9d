#include "profiler/recording/recording.h"

#include <sqlite3.h>

namespace kvscope::profiler {

std::string recording_problem(const std::filesystem::path& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
        return path.string() + ": no such file";
    }
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        sqlite3_close(db);
        return path.string() + ": cannot be opened";
    }
    std::string problem;
    sqlite3_stmt* s = nullptr;
    const int rc = sqlite3_prepare_v2(
        db, "SELECT value FROM KVSCOPE_META WHERE key = 'schema_version'", -1, &s, nullptr);
    if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT) {
        problem = path.string() + ": not a kvscope recording (not an SQLite database, or damaged)";
    } else if (rc != SQLITE_OK) {
        const std::string why = sqlite3_errmsg(db);
        problem = path.string() + ": not a kvscope recording (" + why + ")";
    } else if (sqlite3_step(s) != SQLITE_ROW) {
        problem = path.string() + ": not a kvscope recording (no schema version)";
    } else {
        const int version = sqlite3_column_int(s, 0);
        if (version > kRecordingSchemaVersion) {
            problem = path.string() + ": written by a newer kvscope (recording schema " +
                      std::to_string(version) + ", this build reads up to " +
                      std::to_string(kRecordingSchemaVersion) + "); update kvscope";
        } else if (version < 1) {
            problem = path.string() + ": recording schema version " + std::to_string(version) +
                      " is not valid";
        }
    }
    sqlite3_finalize(s);
    if (problem.empty()) { // the tables must be readable to the end
        if (sqlite3_exec(db, "SELECT count(*) FROM KVSCOPE_EVENTS", nullptr, nullptr, nullptr) !=
            SQLITE_OK) {
            problem = path.string() + ": damaged recording (" + sqlite3_errmsg(db) + ")";
        }
    }
    sqlite3_close(db);
    return problem;
}

} // namespace kvscope::profiler
