// Options of the serving loop every workload-running subcommand shares:
// prefix caching, the scheduler's limits and preemption victim. Names follow
// vLLM's where it has the knob.
#pragma once

#include "engine/session/run_config.h"

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kvscope::cli {

struct ServingOptions {
    bool no_prefix_caching = false;
    std::vector<std::string> cache_policies{"lru"}; // several only where add_to() allowed it
    int max_num_seqs = 64;
    int max_num_batched_tokens = 1024;
    bool no_chunked_prefill = false;
    std::string victim = "newest";

    // `several_policies`: --cache-policy (alias --policy) takes a list, each
    // a run of its own (kvscope simulate compares them).
    void add_to(CLI::App& app, bool several_policies = false);
    // Sets prefix caching and the scheduler's limits in `config`.
    void apply(session::RunConfig& config) const;
};

} // namespace kvscope::cli
