#include "engine/model/llama_config.h"

#include "engine/gguf/gguf_file.h"

#include <array>
#include <string_view>

namespace kvscope::model {
namespace {

// Architectures that share Llama's block (RMSNorm, RoPE on adjacent pairs
// after llama.cpp's conversion, GQA, SwiGLU) and its GGUF tensor names.
constexpr std::array<std::string_view, 3> kLlamaLike{"llama", "mistral", "granite"};

} // namespace

LlamaConfig LlamaConfig::from_gguf(const gguf::GgufFile& file) {
    LlamaConfig config;
    config.architecture = file.require_string("general.architecture");
    bool known = false;
    for (const std::string_view arch : kLlamaLike) {
        known = known || config.architecture == arch;
    }
    if (!known) {
        file.fail("architecture '" + config.architecture +
                  "' is not supported (kvscope runs Llama-family models: llama, mistral)");
    }
    if (const gguf::MetadataValue* name = file.find("general.name"); name && name->as_string()) {
        config.name = *name->as_string();
    }
    const std::string prefix = config.architecture + ".";
    const auto integer = [&](const char* key, std::uint64_t max) {
        const std::uint64_t value = file.require_uint(prefix + key);
        if (value == 0 || value > max) {
            file.fail("metadata '" + prefix + key + "' = " + std::to_string(value) +
                      " is out of range");
        }
        return static_cast<int>(value);
    };
    config.layers = integer("block_count", 1024);
    config.hidden = integer("embedding_length", 1 << 16);
    config.heads = integer("attention.head_count", 1024);
    config.kv_heads = config.heads;
    if (file.find(prefix + "attention.head_count_kv") != nullptr) {
        config.kv_heads = integer("attention.head_count_kv", 1024);
    }
    config.ffn_hidden = integer("feed_forward_length", 1 << 20);
    config.context_length = integer("context_length", 1 << 24);
    if (file.find(prefix + "rope.freq_base") != nullptr) {
        config.rope_theta = static_cast<float>(file.require_float(prefix + "rope.freq_base"));
    }
    if (file.find(prefix + "attention.layer_norm_rms_epsilon") != nullptr) {
        config.rms_eps =
            static_cast<float>(file.require_float(prefix + "attention.layer_norm_rms_epsilon"));
    }
    if (config.hidden % config.heads != 0 || config.heads % config.kv_heads != 0) {
        file.fail("inconsistent attention shape: " + std::to_string(config.hidden) + " wide, " +
                  std::to_string(config.heads) + " heads, " + std::to_string(config.kv_heads) +
                  " KV heads");
    }
    config.head_dim = config.hidden / config.heads;
    if (config.head_dim % 2 != 0) {
        file.fail("head dimension " + std::to_string(config.head_dim) +
                  " is odd (RoPE needs pairs)");
    }
    if (const gguf::MetadataValue* rope_dims = file.find(prefix + "rope.dimension_count")) {
        if (rope_dims->as_uint() != static_cast<std::uint64_t>(config.head_dim)) {
            file.fail("partial rotary embeddings (rope.dimension_count " + rope_dims->describe() +
                      " != head dim " + std::to_string(config.head_dim) + ") are not supported");
        }
    }
    const gguf::TensorInfo& embedding = file.require_tensor("token_embd.weight");
    config.vocab = static_cast<int>(embedding.rows());
    config.tied_embeddings = file.find_tensor("output.weight") == nullptr;
    return config;
}

} // namespace kvscope::model
