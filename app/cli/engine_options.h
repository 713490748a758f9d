// Options every engine-running subcommand shares (model, backend, threads, KV
// cache geometry and size), filling the session's RunConfig; models and
// backends come from the session's loader and backend factory.
#pragma once

#include "engine/model/llama_model.h"
#include "engine/runner/backend.h"
#include "engine/session/run_config.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace kvscope::cli {

struct EngineOptions {
    session::RunConfig config; // the model, backend and cache parts
    std::string backend = "auto";

    void add_to(CLI::App& app);
    // Empty when the options go together, else what is wrong (a usage error).
    std::string resolve();
    // Loads the model, printing what it loads to stderr. Throws with a message
    // that says what to do when the file is missing or invalid.
    std::shared_ptr<const model::LlamaModel> load_model() const;
    // A backend whose cache is the size asked for, else `default_tokens`.
    // `announce`: print the backend and cache size to stderr.
    std::unique_ptr<runner::Backend> make_backend(std::shared_ptr<const model::LlamaModel> model,
                                                  std::int64_t default_tokens,
                                                  bool announce = true) const;
};

} // namespace kvscope::cli
