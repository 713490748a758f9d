// Internal to kvscope_attach: one msgpack event object -> a KvEvent. Both
// layouts (positional arrays, tagged maps) name each value and go through
// the same per-field readers, so they cannot drift apart.
#pragma once

#include "profiler/attach/kv_events.h"

#include <msgpack.hpp>
#include <optional>
#include <string>

namespace kvscope::attach::detail {

enum class EventOutcome : std::uint8_t { kept, unknown_type, malformed };

// Decodes `object` into `out` when kept. Counts unknown fields into
// `counts`; for a malformed event `why` says what was wrong.
EventOutcome decode_event(const msgpack::object& object, std::optional<KvEvent>& out,
                          DecodeCounts& counts, std::string& why);

// "an integer", "a string", ... for messages.
const char* type_name(const msgpack::object& object);

// A signed 64-bit integer (a uint64 above INT64_MAX is not one).
bool read_int(const msgpack::object& object, std::int64_t& out);

} // namespace kvscope::attach::detail
