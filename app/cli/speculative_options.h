// Speculative decoding's options (kvscope run, record and generate): --speculative
// ngram:K | draft:K | off, and for draft:K a drafter: --draft-layers N (the
// self-draft) or --draft-model FILE.gguf; either alone means draft:4.
#pragma once

#include "engine/spec/speculative_config.h"

#include <CLI/CLI.hpp>
#include <string>

namespace kvscope::cli {

struct SpeculativeOptions {
    std::string method; // empty: not given
    int draft_layers = 0;
    std::string draft_model;        // a GGUF with the target's tokenizer
    spec::SpeculativeConfig config; // after resolve()

    void add_to(CLI::App& app);
    // Empty when the options make sense, else what is wrong (a usage error).
    std::string resolve();
};

} // namespace kvscope::cli
