#include "app/ui/run_settings.h"

#include <cstdio>

namespace kvscope::ui {

RunSettings::RunSettings() {
    scheduler.max_num_seqs = 16;
    scheduler.max_num_batched_tokens = 512;
}

std::string RunSettings::problem() const {
    if (block_size < 1 || block_size > 1024) {
        return "the block size must be between 1 and 1024 tokens";
    }
    if (cache_bytes <= 0 && cache_blocks < 2) {
        return "the KV cache needs at least 2 blocks";
    }
    if (requests < 1) {
        return "the workload needs at least one request";
    }
    if (rate <= 0) {
        return "the arrival rate must be above 0 requests per second";
    }
    if (max_tokens < 1) {
        return "each request must be allowed at least one token";
    }
    if (scheduler.max_num_seqs < 1 || scheduler.max_num_batched_tokens < 1) {
        return "the scheduler needs room for at least one sequence and one token per step";
    }
    return eviction.problem(block_size);
}

std::string RunSettings::describe() const {
    const std::string size = cache_bytes > 0
                                 ? std::to_string(cache_bytes / (1024 * 1024)) + " MiB of"
                                 : std::to_string(cache_blocks);
    std::string text = backend + ", " + size + " blocks x " + std::to_string(block_size) + " (" +
                       cache_format.describe() + "), prefix caching " +
                       (prefix_caching ? "on" : "off");
    if (eviction.enabled()) {
        text += ", " + eviction.describe();
    }
    text += ", " + workload + " (" + std::to_string(requests) + " requests";
    char rate_text[32];
    std::snprintf(rate_text, sizeof rate_text, " at %.3g/s)", rate);
    return text + rate_text;
}

} // namespace kvscope::ui
