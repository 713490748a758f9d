#include "engine/session/run_config.h"

#include <cstdio>

namespace kvscope::session {

std::string RunConfig::problem() const {
    if (block_size < 1 || block_size > 1024) {
        return "the block size must be between 1 and 1024 tokens";
    }
    if (std::string p = cache.problem(); !p.empty()) {
        return p;
    }
    if (cache.num_blocks == 1) {
        return "the KV cache needs at least 2 blocks";
    }
    if (max_model_len < 0) {
        return "--max-model-len cannot be negative";
    }
    if (preset.requests < 1) {
        return "the workload needs at least one request";
    }
    if (preset.rate <= 0) {
        return "the arrival rate must be above 0 requests per second";
    }
    if (preset.max_tokens < 1) {
        return "each request must be allowed at least one token";
    }
    if (scheduler.max_num_seqs < 1 || scheduler.max_num_batched_tokens < 1) {
        return "the scheduler needs room for at least one sequence and one token per step";
    }
    return eviction.problem(block_size);
}

std::string RunConfig::describe() const {
    std::string text =
        std::string(backend_kind_name(backend.kind)) + " backend, KV cache " + cache.describe() +
        " in blocks of " + std::to_string(block_size) + " (" + cache_format.describe() +
        "), prefix caching " +
        (prefix_caching ? "on (" + std::string(kv::cache_policy_name(cache_policy)) + ")" : "off") +
        ", " + std::to_string(scheduler.max_num_seqs) + " sequences / " +
        std::to_string(scheduler.max_num_batched_tokens) + " tokens a step, chunked prefill " +
        (scheduler.chunked_prefill ? "on" : "off") + ", preempting the " +
        std::string(sched::victim_policy_name(scheduler.victim));
    if (eviction.enabled()) {
        text += ", " + eviction.describe();
    }
    if (speculative.enabled()) {
        text += ", speculative " + speculative.describe();
    }
    if (offload.capacity_blocks > 0) {
        text += ", offload tier of " + std::to_string(offload.capacity_blocks) + " blocks in " +
                std::string(kv::tier_medium_name(offload.medium)) +
                (offload_write_through ? " (write-through)" : " (written on eviction)");
    }
    text += "; " + workload + " (" + std::to_string(preset.requests) + " requests";
    char rate_text[32];
    std::snprintf(rate_text, sizeof rate_text, " at %.3g/s)", preset.rate);
    return text + rate_text;
}

} // namespace kvscope::session
