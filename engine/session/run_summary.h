// What a served workload came to: where each request's K/V came from (the
// prefix cache, computed, recomputed after preemption), how many tokens came
// out and how fast. `kvscope run` prints it, recordings keep it as JSON.
#pragma once

#include "engine/sched/llm_engine.h"
#include "engine/spec/speculation_totals.h"
#include "engine/tokenizer/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope::session {

struct RequestSummary {
    std::int64_t id = -1;
    std::string state;
    std::string reason;
    std::int64_t prompt_tokens = 0;
    std::int64_t prompt_computed_tokens = 0; // prompt tokens whose K/V were computed (not hits)
    sched::RequestAccounting accounting;
    std::int64_t generated_tokens = 0;
    double ttft_ms = -1; // -1: no first token
    // The generated tokens' bytes, control tokens as their text (as the
    // recording's token_sampled pieces have them); empty without a tokenizer.
    std::string output;
};

struct RunSummary {
    std::string workload;
    std::int64_t prompt_tokens = 0;          // of every request, run or not
    std::int64_t prompt_computed_tokens = 0; // K/V computed (never hits, never unrun prompts)
    std::int64_t prompt_not_run_tokens = 0;  // prompts of rejected requests, and the unreached
                                             // rest of aborted ones
    std::int64_t prefix_hit_tokens = 0;
    std::int64_t shared_short_tokens = 0;
    std::int64_t computed_tokens = 0; // K/V computed for the first time, prompt and output
    std::int64_t recomputed_tokens = 0;
    std::int64_t resumed_hit_tokens = 0;
    std::int64_t generated_tokens = 0;
    std::int64_t evicted_tokens = 0;
    int preemptions = 0;
    spec::SpeculationTotals speculation;
    // The offload tier (none: all zero): prompt tokens it served, and what
    // moving blocks cost.
    std::int64_t tier_hit_tokens = 0;
    kv::OffloadTierStats tier;
    int finished = 0;
    int aborted = 0;
    int rejected = 0;
    std::int64_t steps = 0;
    double seconds = 0;
    double ttft_ms_p50 = 0;
    double ttft_ms_p99 = 0;
    int peak_blocks_used = 0;
    int total_blocks = 0;
    double kv_bytes_per_token = 0;
    // Activations the backend saturated at fp16's range (Backend::activation_overflows).
    std::int64_t activation_overflows = 0;
    std::vector<RequestSummary> requests;

    double prefix_hit_rate() const; // of all prompt tokens
    double output_tokens_per_second() const;
    // `per_request`: include the request rows, each with its whole output
    // (bytes that are not UTF-8, as a token limit can leave, become U+FFFD).
    // `indent` as nlohmann's dump.
    std::string to_json(bool per_request, int indent = -1) const;
};

// `ids` in workload order; `peak_blocks_used` as the caller sampled it;
// `tokenizer` (may be null) gives each request's output text.
RunSummary summarize_run(const sched::LlmEngine& engine, const std::vector<std::int64_t>& ids,
                         const std::string& workload, double seconds, int peak_blocks_used,
                         double kv_bytes_per_token,
                         const tokenizer::Tokenizer* tokenizer = nullptr);

// Nearest-rank percentile (p in [0, 1]) of `values`; 0 when empty.
double percentile(std::vector<double> values, double p);

} // namespace kvscope::session
