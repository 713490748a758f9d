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

struct LayerWeights {
    std::vector<float> attn_norm; // (hidden)
    TensorView wq;                // (heads * head_dim, hidden)
    TensorView wk;                // (kv_heads * head_dim, hidden)
    TensorView wv;                // (kv_heads * head_dim, hidden)
    TensorView wo;                // (hidden, heads * head_dim)
    std::vector<float> ffn_norm;  // (hidden)
    TensorView w_gate;            // (ffn_hidden, hidden)
    TensorView w_up;              // (ffn_hidden, hidden)
    TensorView w_down;            // (hidden, ffn_hidden)
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
