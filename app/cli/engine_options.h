// Options every engine-running subcommand shares (model, threads, KV cache
// geometry), and how they turn into a loaded model and a backend.
#pragma once

#include "engine/kv/kv_format.h"
#include "engine/model/llama_model.h"
#include "engine/runner/backend.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace kvscope::cli {

struct EngineOptions {
    std::string model_path; // empty: KVSCOPE_MODEL or the default cache path
    int threads = 0;        // 0: all hardware threads
    int block_size = 16;
    int cache_tokens = 0; // 0: enough for the run (the subcommand decides)
    kv::KvCacheFormat cache_format;

    void add_to(CLI::App& app);
    // Loads the model, printing what it loads to stderr. Throws with a message
    // that says what to do when the file is missing or invalid.
    std::shared_ptr<const model::LlamaModel> load_model() const;
    // `announce`: print the backend and cache size to stderr.
    std::unique_ptr<runner::Backend> make_backend(std::shared_ptr<const model::LlamaModel> model,
                                                  int default_cache_tokens,
                                                  bool announce = true) const;
};

} // namespace kvscope::cli
