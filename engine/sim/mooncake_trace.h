// Reads a Mooncake request trace (github.com/kvcache-ai/Mooncake,
// FAST25-release/traces): one JSON object a line,
//   {"timestamp": MS, "input_length": N, "output_length": M, "hash_ids": [...]}
// with one hash id per 512-token block of the prompt, chained (an id stands
// for its block and every block before it), the last block partial. Read a
// line at a time, so a trace of any length takes the memory of one request
// (and of the ids seen, to check them).
//
// A line that cannot be a request (not JSON, a field missing or of the wrong
// type, ids that do not cover the input) is a TraceError naming FILE:LINE.
// What a replay can go on with is a warning, also with FILE:LINE: a
// timestamp earlier than the one before (kept in file order, at the earlier
// request's time), an id met before at another block position (ids chain,
// so it cannot stand for two prefixes: the replay takes them as given).
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvscope::sim {

class TraceError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct TraceRequest {
    std::int64_t line = 0; // in the file, from 1
    double arrival_s = 0;  // from the trace's start
    std::int32_t input_tokens = 0;
    std::int32_t output_tokens = 0;
    std::vector<std::int64_t> block_ids; // one per trace block of the prompt
};

class MooncakeTrace {
public:
    static constexpr std::int32_t kBlockTokens = 512; // tokens a hash id covers

    // Throws TraceError when the file cannot be opened.
    explicit MooncakeTrace(const std::string& path);

    // The next request in file order; none at the end. Throws TraceError.
    std::optional<TraceRequest> next();

    const std::vector<std::string>& warnings() const { return warnings_; }
    std::int64_t warning_count() const { return warning_count_; }
    const std::string& path() const { return path_; }

private:
    [[noreturn]] void fail(const std::string& what) const;
    void warn(const std::string& what);

    std::string path_;
    std::ifstream in_;
    std::int64_t line_ = 0;
    double last_arrival_s_ = 0;
    double first_ms_ = -1; // the first request's timestamp
    std::unordered_map<std::int64_t, std::int32_t> position_of_id_;
    std::vector<std::string> warnings_; // the first kMaxWarnings
    std::int64_t warning_count_ = 0;
};

// The prompt token ids a trace request stands for: each trace block's tokens
// derived from its id alone (equal ids, equal tokens; different ids,
// different tokens but by astronomically rare chance), the last block cut to
// the input length. Ids below `vocab`.
std::vector<std::int32_t> trace_prompt_tokens(const TraceRequest& request, std::int32_t vocab);

} // namespace kvscope::sim
