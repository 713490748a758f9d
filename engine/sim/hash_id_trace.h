// Reads a request trace that names each prompt by hash ids of its blocks,
// one JSON object a line:
//   Mooncake (github.com/kvcache-ai/Mooncake, FAST25-release/traces)
//     {"timestamp": MS, "input_length": N, "output_length": M, "hash_ids": [...]}
//     one id per 512-token block, chained (an id stands for its block and
//     every block before it)
//   Qwen-Bailian (github.com/alibaba-edu/qwen-bailian-usagetraces-anon)
//     {"chat_id": C, "parent_chat_id": P, "timestamp": S, "input_length": N,
//      "output_length": M, "type": "text", "turn": T, "hash_ids": [...]}
//     timestamps in seconds, one id per 16-token block (of the prompt after
//     the chat template), salted per-block hashes
// In both the last block is partial. Read a line at a time, so a trace of
// any length takes the memory of one request (and of the ids seen, to check
// them).
//
// A line that cannot be a request (not JSON, a field missing or of the wrong
// type, ids that do not cover the input) is a TraceError naming FILE:LINE.
// What a replay can go on with is a warning, also with FILE:LINE: a
// timestamp earlier than the one before (kept in file order, at the earlier
// request's time); in a chained trace, an id met before at another block
// position (it cannot stand for two prefixes: the replay takes them as
// given).
#pragma once

#include "engine/sim/trace_reader.h"

#include <fstream>
#include <unordered_map>

namespace kvscope::sim {

struct HashIdFormat {
    const char* name;
    std::int32_t tokens_per_id;
    double seconds_per_unit; // of "timestamp"
    const char* unit;        // for messages
    bool chained;            // an id names its whole prefix
};

inline constexpr HashIdFormat kMooncakeFormat{"mooncake", 512, 1e-3, "milliseconds", true};
inline constexpr HashIdFormat kQwenBailianFormat{"qwen-bailian", 16, 1.0, "seconds", false};

class HashIdTrace final : public TraceReader {
public:
    // Throws TraceError when the file cannot be opened.
    HashIdTrace(const std::string& path, const HashIdFormat& format);

    std::optional<TraceRequest> next() override;

private:
    HashIdFormat format_;
    std::ifstream in_;
    std::int64_t line_ = 0;
    double last_arrival_s_ = 0;
    double first_timestamp_ = -1; // the first request's
    std::unordered_map<std::int64_t, std::int32_t> position_of_id_;
};

} // namespace kvscope::sim
