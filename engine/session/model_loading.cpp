#include "engine/session/model_loading.h"

#include "engine/gguf/gguf_file.h"
#include "engine/model/llama_config.h"
#include "engine/model_path.h"
#include "engine/session/cache_size.h"

#include <stdexcept>

namespace kvscope::session {

std::filesystem::path model_file(const std::string& option) {
    ModelPath path = resolve_model_path();
    if (!option.empty()) {
        // A file of that name in the working directory wins over the name.
        const std::optional<std::filesystem::path> named =
            std::filesystem::exists(option) ? std::nullopt : named_model_path(option);
        path = {named.value_or(std::filesystem::path(option)), false};
    }
    if (const std::string problem = model_path_problem(path); !problem.empty()) {
        throw std::runtime_error(problem);
    }
    return path.path;
}

std::shared_ptr<const model::LlamaModel> load_model(const std::filesystem::path& file) {
    return model::LlamaModel::load(file);
}

std::string model_name(const model::LlamaModel& model) {
    const model::LlamaConfig& c = model.config();
    return c.name.empty() ? c.architecture : c.name;
}

std::string draft_model_mismatch(const model::LlamaModel& target, const model::LlamaModel& draft) {
    const tokenizer::Tokenizer& t = target.tokenizer();
    const tokenizer::Tokenizer& d = draft.tokenizer();
    const std::string names =
        "the draft model (" + model_name(draft) + ") and the target (" + model_name(target) + ")";
    if (t.vocab_size() != d.vocab_size() || draft.config().vocab != target.config().vocab) {
        return names + " have different vocabularies (" + std::to_string(d.vocab_size()) + " and " +
               std::to_string(t.vocab_size()) +
               " tokens); a draft model must share "
               "the target's tokenizer";
    }
    for (std::size_t id = 0; id < t.vocab_size(); ++id) {
        const auto token = static_cast<tokenizer::TokenId>(id);
        if (t.token_text(token) != d.token_text(token)) {
            return names + " spell token " + std::to_string(id) +
                   " differently; a draft model must share the target's tokenizer";
        }
        if (t.ends_generation(token) != d.ends_generation(token)) {
            return names + " disagree on whether token " + std::to_string(id) +
                   " ends a generation";
        }
    }
    return {};
}

std::string describe_model(const model::LlamaModel& model) {
    const model::LlamaConfig& c = model.config();
    return model_name(model) + ", " + std::to_string(c.layers) + " layers, " +
           std::to_string(c.hidden) + " wide, " + std::to_string(c.heads) + "/" +
           std::to_string(c.kv_heads) + " heads, " + readable_bytes(model.weights().total_bytes()) +
           " of weights";
}

kv::ModelShape model_shape(const std::filesystem::path& file) {
    const gguf::GgufFile gguf = gguf::GgufFile::open(file);
    const model::LlamaConfig c = model::LlamaConfig::from_gguf(gguf);
    kv::ModelShape shape;
    shape.name = c.name.empty() ? file.filename().string() : c.name;
    shape.layers = c.layers;
    shape.heads = c.heads;
    shape.kv_heads = c.kv_heads;
    shape.key_dim = c.head_dim;
    shape.value_dim = c.head_dim;
    shape.weight_bytes = static_cast<double>(gguf.file_size());
    for (const model::LayerAttention& layer : c.layer_attention) {
        shape.sliding_layers += layer.window > 0 ? 1 : 0;
    }
    shape.sliding_window = c.sliding_window;
    return shape;
}

} // namespace kvscope::session
