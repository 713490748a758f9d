// Options of the serving loop every workload-running subcommand shares:
// prefix caching, the scheduler's limits and preemption victim. Names follow
// vLLM's where it has the knob.
#pragma once

#include "engine/session/run_config.h"

#include <CLI/CLI.hpp>
#include <string>

namespace kvscope::cli {

struct ServingOptions {
    bool no_prefix_caching = false;
    int max_num_seqs = 64;
    int max_num_batched_tokens = 1024;
    bool no_chunked_prefill = false;
    std::string victim = "newest";

    void add_to(CLI::App& app);
    // Sets prefix caching and the scheduler's limits in `config`.
    void apply(session::RunConfig& config) const;
};

} // namespace kvscope::cli
