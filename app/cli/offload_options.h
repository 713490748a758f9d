// The KV cache's second tier (kvscope run and record): --offload-tier
// memory|file with --offload-blocks N, where a file tier lives (--offload-
// file) and when blocks are written (on eviction, or --offload-write-through).
#pragma once

#include "engine/session/run_config.h"

#include <CLI/CLI.hpp>
#include <string>

namespace kvscope::cli {

struct OffloadOptions {
    std::string tier = "none";
    std::int64_t blocks = 0;
    std::string file;
    bool write_through = false;

    void add_to(CLI::App& app);
    // Sets the tier in `config`; empty when the options go together, else
    // what is wrong (a usage error).
    std::string apply(session::RunConfig& config) const;
};

} // namespace kvscope::cli
