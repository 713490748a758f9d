// The SQL views a new recording carries so that a person with `sqlite3` can
// query it without reading kvscope's code: KVSCOPE_STEPS, KVSCOPE_REQUESTS,
// KVSCOPE_OUTPUTS, KVSCOPE_BLOCK_EVENTS, KVSCOPE_OP_SLICES and KVSCOPE_MEMORY, their columns
// named from the typed events' fields (engine/events/typed_events.h), so
// they cannot drift from what the engine writes. docs/recordings.md shows
// them with example queries.
#pragma once

#include <string>

struct sqlite3;

namespace kvscope::profiler {

// CREATE VIEW IF NOT EXISTS statements for every view.
std::string recording_views_sql();

// Adds the views to an open, writable recording (idempotent).
void create_recording_views(sqlite3* db);

} // namespace kvscope::profiler
