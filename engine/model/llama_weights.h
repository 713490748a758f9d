// The tensors of a Llama-family model, viewed in place in the memory-mapped
// GGUF file, with every shape checked against the config. Backend-neutral:
// matrices stay in the file's types and layout, and each backend prepares its
// own form (engine/cpu/cpu_weights.h for the CPU).
#pragma once

#include "engine/model/llama_config.h"
#include "engine/model/tensor_view.h"

#include <vector>

namespace kvscope::gguf {
class GgufFile;
}

namespace kvscope::model {

// The optional vectors are empty where the architecture has no such step
// (architecture.h says which it has).
struct LayerWeights {
    std::vector<float> attn_norm;      // (hidden)
    TensorView wq;                     // (heads * head_dim, hidden)
    TensorView wk;                     // (kv_heads * head_dim, hidden)
    TensorView wv;                     // (kv_heads * head_dim, hidden)
    std::vector<float> q_bias;         // (heads * head_dim), optional
    std::vector<float> k_bias;         // (kv_heads * head_dim), optional
    std::vector<float> v_bias;         // (kv_heads * head_dim), optional
    std::vector<float> q_norm;         // (head_dim), optional: RMSNorm of each query head
    std::vector<float> k_norm;         // (head_dim), optional: RMSNorm of each key head
    TensorView wo;                     // (hidden, heads * head_dim)
    std::vector<float> post_attn_norm; // (hidden), optional: of the attention output
    std::vector<float> ffn_norm;       // (hidden)
    TensorView w_gate;                 // (ffn_hidden, hidden)
    TensorView w_up;                   // (ffn_hidden, hidden)
    TensorView w_down;                 // (hidden, ffn_hidden)
    std::vector<float> post_ffn_norm;  // (hidden), optional: of the FFN output
};

struct LlamaWeights {
    TensorView token_embedding; // (vocab, hidden)
    std::vector<LayerWeights> layers;
    std::vector<float> output_norm; // (hidden)
    TensorView output;              // (vocab, hidden); token_embedding when tied

    // Throws gguf::GgufError naming the tensor when one is missing, has the
    // wrong shape or a type kvscope cannot compute with.
    static LlamaWeights from_gguf(const gguf::GgufFile& file, const LlamaConfig& config);

    // Bytes of weight data in the file's types (all matrices and norms).
    std::int64_t total_bytes() const;
};

} // namespace kvscope::model
