// Valid SQLite files with hostile contents: a real recording (one of the
// seeds under corpus/recording_file) changed by a few SQL edits the input
// describes: a cell set to a value of any type (NULL, extreme integers,
// NaN, text, blobs), rows deleted or duplicated, tables or columns dropped,
// the schema version from the past or the future. Every reader of
// recordings then gets it (read_recording.h); the contract is
// RecordingError, nothing else, and memory bounded however big the numbers.
#include "tests/fuzz/fuzz_file.h"
#include "tests/fuzz/read_recording.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
// clang's fuzzer/FuzzedDataProvider.h, by its path (tests/fuzz/CMakeLists.txt).
#include KVSCOPE_FUZZED_DATA_PROVIDER
#include <limits>
#include <sqlite3.h>
#include <string>
#include <vector>

using namespace kvscope;

namespace {

const std::vector<std::filesystem::path>& templates() {
    static const std::vector<std::filesystem::path> files = [] {
        std::vector<std::filesystem::path> found;
        const std::filesystem::path dir =
            std::filesystem::path(KVSCOPE_SOURCE_DIR) / "tests/fuzz/corpus/recording_file";
        for (const auto& entry : std::filesystem::directory_iterator(dir)) {
            if (entry.path().extension() == ".sqlite") {
                found.push_back(entry.path());
            }
        }
        std::sort(found.begin(), found.end());
        if (found.empty()) {
            std::fprintf(stderr, "fuzz_recording_rows: no seed recordings in %s\n", dir.c_str());
            std::exit(2);
        }
        return found;
    }();
    return files;
}

std::vector<std::string> column_of(sqlite3* db, const std::string& sql) {
    std::vector<std::string> values;
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK) {
        while (sqlite3_step(statement) == SQLITE_ROW) {
            const auto* text = sqlite3_column_text(statement, 0);
            values.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
        }
    }
    sqlite3_finalize(statement);
    return values;
}

std::string quoted(const std::string& name) {
    std::string out = "\"";
    for (const char c : name) {
        out += c == '"' ? std::string("\"\"") : std::string(1, c);
    }
    return out + "\"";
}

template <typename T>
const T& pick(FuzzedDataProvider& input, const std::vector<T>& items) {
    return items[input.ConsumeIntegralInRange<std::size_t>(0, items.size() - 1)];
}

// Binds a value of the input's choosing to parameter 1.
void bind_hostile_value(FuzzedDataProvider& input, sqlite3_stmt* statement) {
    static const std::vector<std::int64_t> integers = {
        0,
        -1,
        1,
        std::numeric_limits<std::int32_t>::max(),
        std::numeric_limits<std::int32_t>::min(),
        std::int64_t{1} << 31,
        std::int64_t{1} << 32,
        std::int64_t{1} << 40,
        1'000'000'000,
        std::numeric_limits<std::int64_t>::max(),
        std::numeric_limits<std::int64_t>::min(),
    };
    static const std::vector<double> reals = {std::numeric_limits<double>::quiet_NaN(),
                                              std::numeric_limits<double>::infinity(),
                                              -std::numeric_limits<double>::infinity(),
                                              -0.0,
                                              1e300,
                                              -1e300,
                                              0.5};
    switch (input.ConsumeIntegralInRange(0, 5)) {
    case 0:
        sqlite3_bind_null(statement, 1);
        break;
    case 1:
        sqlite3_bind_int64(statement, 1, pick(input, integers));
        break;
    case 2:
        sqlite3_bind_int64(statement, 1, input.ConsumeIntegral<std::int64_t>());
        break;
    case 3:
        sqlite3_bind_double(statement, 1, pick(input, reals));
        break;
    case 4: {
        const std::string text = input.ConsumeRandomLengthString(64);
        sqlite3_bind_text(statement, 1, text.data(), static_cast<int>(text.size()),
                          SQLITE_TRANSIENT);
        break;
    }
    default: {
        const std::string bytes = input.ConsumeRandomLengthString(64);
        sqlite3_bind_blob(statement, 1, bytes.data(), static_cast<int>(bytes.size()),
                          SQLITE_TRANSIENT);
    }
    }
}

void run(sqlite3* db, const std::string& sql) {
    sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr); // failures are fine: edits may clash
}

void edit(FuzzedDataProvider& input, sqlite3* db) {
    const std::vector<std::string> tables =
        column_of(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
    if (tables.empty()) {
        return;
    }
    const std::string table = quoted(pick(input, tables));
    const std::vector<std::string> columns =
        column_of(db, "SELECT name FROM pragma_table_info(" + table + ")");
    const std::string row_filter = " WHERE rowid = (SELECT rowid FROM " + table +
                                   " LIMIT 1 OFFSET " +
                                   std::to_string(input.ConsumeIntegralInRange(0, 400)) + ")";
    switch (input.ConsumeIntegralInRange(0, 6)) {
    case 0:
    case 1: { // the commonest edit: one cell, any value
        if (columns.empty()) {
            return;
        }
        const std::string sql =
            "UPDATE " + table + " SET " + quoted(pick(input, columns)) + " = ?1" + row_filter;
        sqlite3_stmt* statement = nullptr;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK) {
            bind_hostile_value(input, statement);
            sqlite3_step(statement);
        }
        sqlite3_finalize(statement);
        break;
    }
    case 2:
        run(db, "DELETE FROM " + table + row_filter);
        break;
    case 3:
        run(db, "INSERT INTO " + table + " SELECT * FROM " + table + row_filter);
        break;
    case 4:
        run(db, "DROP TABLE " + table);
        break;
    case 5:
        if (!columns.empty()) {
            run(db, "ALTER TABLE " + table + " DROP COLUMN " + quoted(pick(input, columns)));
        }
        break;
    default:
        run(db, "UPDATE KVSCOPE_META SET value = '" +
                    std::to_string(input.ConsumeIntegralInRange(-2, 5)) +
                    "' WHERE key = 'schema_version'");
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    FuzzedDataProvider input(data, size);
    static fuzz::FuzzFile file("recording.sqlite");
    const std::filesystem::path& seed = pick(input, templates());
    std::filesystem::copy_file(seed, file.path(),
                               std::filesystem::copy_options::overwrite_existing);
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(file.path().c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
        std::fprintf(stderr, "fuzz_recording_rows: cannot open %s\n", file.path().c_str());
        std::abort();
    }
    const int edits = input.ConsumeIntegralInRange(1, 8);
    for (int i = 0; i < edits && input.remaining_bytes() > 0; ++i) {
        edit(input, db);
    }
    sqlite3_close(db);
    fuzz::read_recording(file.path());
    return 0;
}
