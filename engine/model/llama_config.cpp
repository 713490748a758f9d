#include "engine/model/llama_config.h"

#include "engine/gguf/dequantize.h"
#include "engine/gguf/gguf_file.h"

#include <cmath>

namespace kvscope::model {

LlamaConfig LlamaConfig::from_gguf(const gguf::GgufFile& file) {
    LlamaConfig config;
    config.architecture = file.require_string("general.architecture");
    const Architecture* traits = find_architecture(config.architecture);
    if (traits == nullptr) {
        file.fail("architecture '" + config.architecture + "' is not supported (kvscope runs " +
                  supported_architectures() + ")");
    }
    config.traits = *traits;
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
    // Qwen3 and Gemma give the head width; Llama's is the width over the heads.
    if (file.find(prefix + "attention.key_length") != nullptr) {
        config.head_dim = integer("attention.key_length", 1 << 12);
        if (file.find(prefix + "attention.value_length") != nullptr &&
            integer("attention.value_length", 1 << 12) != config.head_dim) {
            file.fail("keys and values of different widths (attention.key_length " +
                      std::to_string(config.head_dim) + ", value_length " +
                      std::to_string(integer("attention.value_length", 1 << 12)) +
                      ") are not supported");
        }
    } else if (config.hidden % config.heads == 0) {
        config.head_dim = config.hidden / config.heads;
        if (file.find(prefix + "attention.value_length") != nullptr &&
            integer("attention.value_length", 1 << 12) != config.head_dim) {
            file.fail("attention.value_length differs from the head width " +
                      std::to_string(config.head_dim) + ": not supported");
        }
    }
    if (config.head_dim == 0 || config.heads % config.kv_heads != 0) {
        file.fail("inconsistent attention shape: " + std::to_string(config.hidden) + " wide, " +
                  std::to_string(config.heads) + " heads, " + std::to_string(config.kv_heads) +
                  " KV heads");
    }
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
    for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
        if (file.find(prefix + key) != nullptr) {
            file.fail("metadata '" + prefix + key + "': logit soft-capping is not supported");
        }
    }
    // Gemma 3 4B and larger scale their global layers' positions by 1/8.
    // A factor of 0 or 1 means none, as llama.cpp reads it.
    if (const gguf::MetadataValue* factor = file.find(prefix + "rope.scaling.factor")) {
        const double value = file.require_float(prefix + "rope.scaling.factor");
        if (value != 0.0 && value != 1.0) {
            file.fail("metadata '" + prefix + "rope.scaling.factor' = " + factor->describe() +
                      ": scaled RoPE (Gemma 3 4B and larger, long-context Llama and Qwen "
                      "files) is not supported yet");
        }
    }
    // Gemma 3 27B scales by its width over the heads, the others by the head
    // width (llama.cpp and transformers' query_pre_attn_scalar agree).
    const bool gemma3_27b = config.architecture == "gemma3" && config.layers == 62;
    config.attention_scale =
        1.0f /
        std::sqrt(static_cast<float>(gemma3_27b ? config.hidden / config.heads : config.head_dim));
    if (config.traits.global_layer_period > 0 &&
        file.find(prefix + "attention.sliding_window") != nullptr) {
        config.sliding_window = integer("attention.sliding_window", 1 << 24);
    }
    for (int l = 0; l < config.layers; ++l) {
        const bool sliding =
            config.sliding_window > 0 && (l + 1) % config.traits.global_layer_period != 0;
        config.layer_attention.push_back(
            sliding ? LayerAttention{config.sliding_window, config.traits.sliding_rope_base}
                    : LayerAttention{0, config.rope_theta});
    }
    // Llama 3.x's scaled RoPE comes as a tensor of each pair's frequency
    // divisor (llama.cpp's converter computes it from the model's
    // rope_scaling settings, which the file does not keep).
    if (const gguf::TensorInfo* freqs = file.find_tensor("rope_freqs.weight"); freqs != nullptr) {
        const auto pairs = static_cast<std::uint64_t>(config.head_dim / 2);
        if (freqs->element_count != pairs || !gguf::can_dequantize(freqs->type)) {
            file.fail("tensor 'rope_freqs.weight' should hold " + std::to_string(pairs) +
                      " values (head_dim / 2), has " + freqs->shape_string() + " of " +
                      std::string(gguf::tensor_type_name(freqs->type)));
        }
        config.rope_divisors.resize(pairs);
        gguf::dequantize_values(freqs->type, file.tensor_bytes(*freqs).data(),
                                config.rope_divisors.data(), static_cast<std::int64_t>(pairs));
        for (const float divisor : config.rope_divisors) {
            if (!(divisor > 0.0f) || !std::isfinite(divisor)) {
                file.fail("tensor 'rope_freqs.weight' holds " + std::to_string(divisor) +
                          ": a RoPE frequency divisor must be positive and finite");
            }
        }
    }
    const gguf::TensorInfo& embedding = file.require_tensor("token_embd.weight");
    config.vocab = static_cast<int>(embedding.rows());
    config.tied_embeddings = file.find_tensor("output.weight") == nullptr;
    return config;
}

kv::KvGroupLayout kv_group_layout(const LlamaConfig& config, bool hybrid) {
    if (!hybrid || !config.hybrid()) {
        return kv::KvGroupLayout::single(config.layers);
    }
    std::vector<std::int32_t> windows;
    windows.reserve(config.layer_attention.size());
    for (const LayerAttention& layer : config.layer_attention) {
        windows.push_back(layer.window);
    }
    return kv::KvGroupLayout::for_windows(windows);
}

} // namespace kvscope::model
