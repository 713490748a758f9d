#include "engine/model/llama_model.h"

namespace kvscope::model {

std::shared_ptr<const LlamaModel> LlamaModel::load(const std::filesystem::path& path) {
    gguf::GgufFile file = gguf::GgufFile::open(path);
    LlamaConfig config = LlamaConfig::from_gguf(file);
    // The weight views point into the mapping, which moves with `file`
    // without being remapped, so they stay valid inside the model.
    LlamaWeights weights = LlamaWeights::from_gguf(file, config);
    tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_gguf(file);
    if (tokenizer.vocab_size() != static_cast<std::size_t>(config.vocab)) {
        file.fail("tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                  " tokens but token_embd.weight has " + std::to_string(config.vocab) + " rows");
    }
    return std::shared_ptr<const LlamaModel>(new LlamaModel(
        std::move(file), std::move(config), std::move(weights), std::move(tokenizer)));
}

} // namespace kvscope::model
