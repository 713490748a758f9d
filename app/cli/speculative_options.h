// Speculative decoding's options (kvscope run, record and bench):
// --speculative ngram:K | draft:K | off, and --draft-layers N for the
// self-draft (alone it means draft:4).
#pragma once

#include "engine/spec/speculative_config.h"

#include <CLI/CLI.hpp>
#include <string>

namespace kvscope::cli {

struct SpeculativeOptions {
    std::string method = "off";
    int draft_layers = 0;
    spec::SpeculativeConfig config; // after resolve()

    void add_to(CLI::App& app);
    // Empty when the options make sense, else what is wrong (a usage error).
    std::string resolve();
};

} // namespace kvscope::cli
