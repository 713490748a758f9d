// JSON text whatever bytes its strings hold. Text kvscope passes on comes
// from recordings, models, traces and other engines, and a token is bytes
// (half a character, or none at all); nlohmann's plain dump() throws on
// invalid UTF-8, so every writer of such JSON goes through here, where those
// bytes become U+FFFD.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvscope {

// `indent` as for nlohmann::json::dump (-1: one line).
inline std::string json_text(const nlohmann::json& value, int indent = -1) {
    return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace kvscope
