#include "engine/sim/mooncake_trace.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace kvscope::sim {
namespace {

constexpr std::size_t kMaxWarnings = 20;

// splitmix64: a well-mixed 64-bit value from any input.
std::uint64_t mix(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

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

MooncakeTrace::MooncakeTrace(const std::string& path)
    : path_(path)
    , in_(path) {
    if (!in_) {
        throw TraceError(path + ": cannot open the trace");
    }
}

void MooncakeTrace::fail(const std::string& what) const {
    throw TraceError(path_ + ":" + std::to_string(line_) + ": " + what);
}

void MooncakeTrace::warn(const std::string& what) {
    ++warning_count_;
    if (warnings_.size() < kMaxWarnings) {
        warnings_.push_back(path_ + ":" + std::to_string(line_) + ": " + what);
    }
}

std::optional<TraceRequest> MooncakeTrace::next() {
    std::string text;
    while (std::getline(in_, text)) {
        ++line_;
        if (text.find_first_not_of(" \t\r") == std::string::npos) {
            continue; // a blank line, at the end say
        }
        nlohmann::json object;
        try {
            object = nlohmann::json::parse(text);
        } catch (const nlohmann::json::exception& e) {
            fail(std::string("not JSON (") + e.what() + ")");
        }
        if (!object.is_object()) {
            fail("not a JSON object");
        }
        TraceRequest request;
        request.line = line_;
        const auto timestamp = object.find("timestamp");
        if (timestamp == object.end() || !timestamp->is_number() ||
            !std::isfinite(timestamp->get<double>()) || timestamp->get<double>() < 0) {
            fail("\"timestamp\" (milliseconds, not negative) is missing or not a number");
        }
        std::int64_t input = 0;
        std::int64_t output = 0;
        constexpr std::int64_t kMaxTokens = 1 << 24;
        if (!read_count(object, "input_length", kMaxTokens, input) || input == 0) {
            fail("\"input_length\" (tokens, 1 or more) is missing or not a whole number");
        }
        if (!read_count(object, "output_length", kMaxTokens, output)) {
            fail("\"output_length\" (tokens) is missing or not a whole number");
        }
        const auto ids = object.find("hash_ids");
        if (ids == object.end() || !ids->is_array()) {
            fail("\"hash_ids\" (a list of block ids) is missing");
        }
        for (const nlohmann::json& id : *ids) {
            if (!id.is_number_integer()) {
                fail("a hash id is not an integer");
            }
            request.block_ids.push_back(id.get<std::int64_t>());
        }
        const std::int64_t blocks = (input + kBlockTokens - 1) / kBlockTokens;
        if (static_cast<std::int64_t>(request.block_ids.size()) != blocks) {
            fail(std::to_string(request.block_ids.size()) + " hash ids for " +
                 std::to_string(input) + " input tokens (" + std::to_string(blocks) +
                 " blocks of " + std::to_string(kBlockTokens) + ")");
        }
        request.input_tokens = static_cast<std::int32_t>(input);
        request.output_tokens = static_cast<std::int32_t>(output);
        // From the first request: a trace stamped in epoch milliseconds
        // replays from 0 all the same.
        if (first_ms_ < 0) {
            first_ms_ = timestamp->get<double>();
        }
        request.arrival_s = (timestamp->get<double>() - first_ms_) / 1000.0;
        if (request.arrival_s < last_arrival_s_) {
            warn("timestamp earlier than the line before: taken at that line's time");
            request.arrival_s = last_arrival_s_;
        }
        last_arrival_s_ = request.arrival_s;
        for (std::size_t i = 0; i < request.block_ids.size(); ++i) {
            const auto [it, added] =
                position_of_id_.emplace(request.block_ids[i], static_cast<std::int32_t>(i));
            if (!added && it->second != static_cast<std::int32_t>(i)) {
                warn("hash id " + std::to_string(request.block_ids[i]) + " at block " +
                     std::to_string(i) + ", met before at block " + std::to_string(it->second));
            }
        }
        return request;
    }
    return std::nullopt;
}

std::vector<std::int32_t> trace_prompt_tokens(const TraceRequest& request, std::int32_t vocab) {
    std::vector<std::int32_t> tokens;
    tokens.reserve(static_cast<std::size_t>(request.input_tokens));
    for (const std::int64_t id : request.block_ids) {
        const std::uint64_t seed = mix(static_cast<std::uint64_t>(id));
        for (std::int32_t j = 0; j < MooncakeTrace::kBlockTokens &&
                                 static_cast<std::int32_t>(tokens.size()) < request.input_tokens;
             ++j) {
            const std::uint64_t value = mix(seed + static_cast<std::uint64_t>(j));
            tokens.push_back(static_cast<std::int32_t>(value % static_cast<std::uint64_t>(vocab)));
        }
    }
    return tokens;
}

} // namespace kvscope::sim
