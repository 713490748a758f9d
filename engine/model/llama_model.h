// A loaded Llama-family model: the mapped GGUF file, its config, weight views
// and tokenizer. Immutable once loaded; backends and runs share it.
#pragma once

#include "engine/gguf/gguf_file.h"
#include "engine/model/llama_config.h"
#include "engine/model/llama_weights.h"
#include "engine/tokenizer/tokenizer.h"

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <typeindex>

namespace kvscope::model {

class LlamaModel {
public:
    // Throws gguf::GgufError with the file and the problem.
    static std::shared_ptr<const LlamaModel> load(const std::filesystem::path& path);

    const gguf::GgufFile& file() const { return file_; }
    const LlamaConfig& config() const { return config_; }
    const LlamaWeights& weights() const { return weights_; }
    const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }

    // A backend's own form of the weights (the CPU's packed rows, a GPU's
    // device copies), made by `make` on the first request and kept as long as
    // the model, so every backend of this model shares one (a quality sweep
    // or the app's runs make many). Thread-safe; the model stays neutral,
    // knowing only the type as a key.
    template <class Prepared, class Make>
    std::shared_ptr<const Prepared> prepared(Make&& make) const {
        const std::lock_guard lock(prepared_mutex_);
        std::shared_ptr<const void>& slot = prepared_[std::type_index(typeid(Prepared))];
        if (!slot) {
            slot = std::shared_ptr<const Prepared>(make());
        }
        return std::static_pointer_cast<const Prepared>(slot);
    }

private:
    LlamaModel(gguf::GgufFile file, LlamaConfig config, LlamaWeights weights,
               tokenizer::Tokenizer tokenizer)
        : file_(std::move(file))
        , config_(std::move(config))
        , weights_(std::move(weights))
        , tokenizer_(std::move(tokenizer)) {}

    gguf::GgufFile file_; // owns the mapping the weight views point into
    LlamaConfig config_;
    LlamaWeights weights_;
    tokenizer::Tokenizer tokenizer_;
    mutable std::mutex prepared_mutex_;
    mutable std::map<std::type_index, std::shared_ptr<const void>> prepared_;
};

} // namespace kvscope::model
