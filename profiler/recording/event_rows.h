// The engine events of a recording, read back in the order they were
// written: the one reader of KVSCOPE_EVENTS that replay, stats and export
// share. Each row comes back as the flat EngineEvent; read its fields through
// the kind's typed event (engine/events/typed_events.h).
#pragma once

#include "engine/events/engine_event.h"
#include "profiler/recording/sqlite_util.h"

#include <cstdint>
#include <string>

namespace kvscope::profiler {

class EventRows {
public:
    // `name` names the recording in errors.
    EventRows(sqlite3* db, std::string name);

    // The next event of a kind this build knows (rows a newer kvscope wrote
    // are skipped: not ours to guess at); false after the last. Throws
    // RecordingError on a row no engine could have written.
    bool next(events::EngineEvent& event);

    // Rows read so far, skipped ones included.
    std::int64_t rows_read() const { return read_; }
    // How many rows there are, without a scan (ids are assigned from 1).
    static std::int64_t estimated_count(sqlite3* db);

private:
    Statement rows_;
    std::string name_;
    std::int64_t read_ = 0;
};

} // namespace kvscope::profiler
