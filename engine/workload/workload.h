// Workloads: the requests a run serves and when they arrive, from a built-in
// preset or a JSONL trace. Deterministic: the same preset, options and seed
// give the same requests.
#pragma once

#include "engine/sampling/sampler.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope::workload {

struct WorkloadRequest {
    double arrival_seconds = 0; // from the start of the run
    // Exactly one of text and ids is set. Text is wrapped in the chat
    // template when `chat` is set.
    std::string text;
    std::vector<std::int32_t> ids;
    bool chat = false;
    std::string system; // chat only: the system message ("" for none)
    // Earlier turns of a conversation (user, assistant, user, ...), chat only.
    std::vector<std::string> history;
    int max_tokens = 64;
    std::optional<sampling::SamplingParams> sampling; // unset: the run's default
};

struct PresetOptions {
    std::uint64_t seed = 1;
    int requests = 16;
    double rate = 2.0; // requests per second, for arrivals spread in time
    int max_tokens = 64;
};

const std::vector<std::string>& workload_preset_names();
std::string workload_preset_help(); // one line per preset

// Throws std::invalid_argument for an unknown name.
std::vector<WorkloadRequest> make_preset(std::string_view name, const PresetOptions& options);

// A malformed trace line: the message names the source, line and reason.
class WorkloadError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// One JSON object per line (blank lines and lines starting with '#' are
// skipped):
//   {"arrival": 0.5, "prompt": "text", "chat": true, "max_tokens": 32,
//    "temperature": 0.7, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
//    "repetition_penalty": 1.1, "seed": 3, "system": "..."}
// or "prompt_ids": [1, 2, 3] instead of "prompt". Sorted by arrival.
std::vector<WorkloadRequest> parse_trace(std::string_view text, std::string_view source);
std::vector<WorkloadRequest> load_trace(const std::filesystem::path& path);

// A preset name, or else a path to a .jsonl trace.
std::vector<WorkloadRequest> load_workload(std::string_view preset_or_path,
                                           const PresetOptions& options);

} // namespace kvscope::workload
