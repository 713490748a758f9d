// Token-eviction options shared by `run` and `eval`: --eviction and its
// knobs, checked together so a bad combination is a usage error.
#pragma once

#include "engine/kv/eviction_policy.h"

#include <CLI/CLI.hpp>

namespace kvscope::cli {

struct EvictionOptions {
    kv::EvictionConfig config;
    std::string kind = "none";

    void add_to(CLI::App& app);
    // Empty when the options work with `block_size`, else what is wrong.
    std::string resolve(int block_size);
};

} // namespace kvscope::cli
