#include "engine/sim/hash_id_trace.h"

#include "engine/util/text_lines.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace kvscope::sim {
namespace {

// A non-negative integer field that fits `limit`; false otherwise.
bool read_count(const nlohmann::json& object, const char* name, std::int64_t limit,
                std::int64_t& out) {
    const auto it = object.find(name);
    if (it == object.end() || !it->is_number_integer()) {
        return false;
    }
    const auto value = it->get<std::int64_t>();
    if (value < 0 || value > limit) {
        return false;
    }
    out = value;
    return true;
}

} // namespace

HashIdTrace::HashIdTrace(const std::string& path, const HashIdFormat& format)
    : TraceReader(path)
    , format_(format)
    , in_(path) {
    if (!in_) {
        fail(0, "cannot open the trace");
    }
}

std::optional<TraceRequest> HashIdTrace::next() {
    std::string text;
    for (LineRead read; (read = read_line(in_, text)) != LineRead::end;) {
        ++line_;
        if (read == LineRead::too_long) {
            fail(line_, too_long_trace_line());
        }
        if (text.find_first_not_of(" \t\r") == std::string::npos) {
            continue; // a blank line, at the end say
        }
        nlohmann::json object;
        try {
            object = nlohmann::json::parse(text);
        } catch (const nlohmann::json::exception& e) {
            fail(line_, std::string("not JSON (") + e.what() + ")");
        }
        if (!object.is_object()) {
            fail(line_, "not a JSON object");
        }
        TraceRequest request;
        request.line = line_;
        const auto timestamp = object.find("timestamp");
        if (timestamp == object.end() || !timestamp->is_number() ||
            !std::isfinite(timestamp->get<double>()) || timestamp->get<double>() < 0) {
            fail(line_, std::string("\"timestamp\" (") + format_.unit +
                            ", not negative) is missing or not a number");
        }
        std::int64_t input = 0;
        std::int64_t output = 0;
        constexpr std::int64_t kMaxTokens = 1 << 24;
        if (!read_count(object, "input_length", kMaxTokens, input) || input == 0) {
            fail(line_, "\"input_length\" (tokens, 1 or more) is missing or not a whole number");
        }
        if (!read_count(object, "output_length", kMaxTokens, output)) {
            fail(line_, "\"output_length\" (tokens) is missing or not a whole number");
        }
        const auto ids = object.find("hash_ids");
        if (ids == object.end() || !ids->is_array()) {
            fail(line_, "\"hash_ids\" (a list of block ids) is missing");
        }
        for (const nlohmann::json& id : *ids) {
            if (!id.is_number_integer()) {
                fail(line_, "a hash id is not an integer");
            }
            request.block_ids.push_back(id.get<std::int64_t>());
        }
        const std::int64_t blocks = (input + format_.tokens_per_id - 1) / format_.tokens_per_id;
        if (static_cast<std::int64_t>(request.block_ids.size()) != blocks) {
            fail(line_, std::to_string(request.block_ids.size()) + " hash ids for " +
                            std::to_string(input) + " input tokens (" + std::to_string(blocks) +
                            " blocks of " + std::to_string(format_.tokens_per_id) + ")");
        }
        request.input_tokens = static_cast<std::int32_t>(input);
        request.output_tokens = static_cast<std::int32_t>(output);
        request.tokens_per_id = format_.tokens_per_id;
        // From the first request: a trace stamped in epoch time replays from
        // 0 all the same.
        if (first_timestamp_ < 0) {
            first_timestamp_ = timestamp->get<double>();
        }
        request.arrival_s =
            (timestamp->get<double>() - first_timestamp_) * format_.seconds_per_unit;
        if (request.arrival_s < last_arrival_s_) {
            warn(line_, "timestamp earlier than the line before: taken at that line's time");
            request.arrival_s = last_arrival_s_;
        }
        last_arrival_s_ = request.arrival_s;
        for (std::size_t i = 0; format_.chained && i < request.block_ids.size(); ++i) {
            const auto [it, added] =
                position_of_id_.emplace(request.block_ids[i], static_cast<std::int32_t>(i));
            if (!added && it->second != static_cast<std::int32_t>(i)) {
                warn(line_, "hash id " + std::to_string(request.block_ids[i]) + " at block " +
                                std::to_string(i) + ", met before at block " +
                                std::to_string(it->second));
            }
        }
        return request;
    }
    return std::nullopt;
}

} // namespace kvscope::sim
