// A loaded Llama-family model: the mapped GGUF file, its config, weight views
// and tokenizer. Immutable once loaded; backends and runs share it.
#pragma once

#include "engine/gguf/gguf_file.h"
#include "engine/model/llama_config.h"
#include "engine/model/llama_weights.h"
#include "engine/tokenizer/tokenizer.h"

#include <filesystem>
#include <memory>

namespace kvscope::model {

class LlamaModel {
public:
    // Throws gguf::GgufError with the file and the problem.
    static std::shared_ptr<const LlamaModel> load(const std::filesystem::path& path);

    const gguf::GgufFile& file() const { return file_; }
    const LlamaConfig& config() const { return config_; }
    const LlamaWeights& weights() const { return weights_; }
    const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }

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
};

} // namespace kvscope::model
