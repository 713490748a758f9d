// Hyperparameters of a Llama-family model (Llama, Mistral, Qwen2/3, Gemma 3),
// read from GGUF metadata under the file's architecture prefix
// ("llama.block_count", ...).
#pragma once

#include "engine/kv/kv_groups.h"
#include "engine/model/architecture.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope::gguf {
class GgufFile;
}

namespace kvscope::model {

// How one layer attends: over the whole context or a sliding window, and the
// RoPE base it rotates with.
struct LayerAttention {
    int window = 0; // keys within this many positions of the query (itself included); 0: all
    float rope_base = 10000.0f;
};

struct LlamaConfig {
    std::string architecture; // general.architecture
    Architecture traits;      // what its block adds to Llama's (architecture.h)
    std::string name;         // general.name, for display
    int layers = 0;
    int hidden = 0;     // embedding width
    int heads = 0;      // query heads
    int kv_heads = 0;   // key/value heads (grouped-query attention when < heads)
    int head_dim = 0;   // per head, of queries, keys and values (attention.key_length)
    int ffn_hidden = 0; // SwiGLU inner width
    int vocab = 0;
    int context_length = 0;      // trained context
    float rope_theta = 10000.0f; // the global layers' RoPE base
    // (head_dim / 2): each RoPE pair's frequency divided by it (Llama 3's
    // scaled RoPE, the file's rope_freqs tensor); empty: none, all 1.
    std::vector<float> rope_divisors;
    const float* rope_divisors_or_null() const {
        return rope_divisors.empty() ? nullptr : rope_divisors.data();
    }
    float attention_scale =
        0.0f;               // scores are q.k times this (1/sqrt(head_dim) but for Gemma 3 27B)
    int sliding_window = 0; // of the sliding layers; 0: every layer is global
    std::vector<LayerAttention> layer_attention; // (layers)
    float rms_eps = 1e-5f;
    bool tied_embeddings = false; // output head shares token_embd

    // Whether some layers attend over a sliding window.
    bool hybrid() const { return sliding_window > 0; }

    // Throws gguf::GgufError naming the file and key when metadata is missing
    // or inconsistent, or the architecture is not one kvscope runs.
    static LlamaConfig from_gguf(const gguf::GgufFile& file);
};

// How the model's layers share the paged KV cache: grouped by window when
// `hybrid` (a sliding group's tables let go of what its window left), else
// one group of every layer keeping the whole context.
kv::KvGroupLayout kv_group_layout(const LlamaConfig& config, bool hybrid = true);

} // namespace kvscope::model
