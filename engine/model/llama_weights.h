// The tensors of a Llama-family model, viewed in place in the memory-mapped
// GGUF file, with every shape checked against the config.
#pragma once

#include "engine/cpu/matmul.h"
#include "engine/model/llama_config.h"

#include <vector>

namespace kvscope::gguf {
class GgufFile;
}

namespace kvscope::model {

struct LayerWeights {
    std::vector<float> attn_norm; // (hidden)
    cpu::WeightMatrix wq;         // (heads * head_dim, hidden)
    cpu::WeightMatrix wk;         // (kv_heads * head_dim, hidden)
    cpu::WeightMatrix wv;         // (kv_heads * head_dim, hidden)
    cpu::WeightMatrix wo;         // (hidden, heads * head_dim)
    std::vector<float> ffn_norm;  // (hidden)
    cpu::WeightMatrix w_gate;     // (ffn_hidden, hidden)
    cpu::WeightMatrix w_up;       // (ffn_hidden, hidden)
    cpu::WeightMatrix w_down;     // (hidden, ffn_hidden)
};

struct LlamaWeights {
    cpu::WeightMatrix token_embedding; // (vocab, hidden)
    std::vector<LayerWeights> layers;
    std::vector<float> output_norm; // (hidden)
    cpu::WeightMatrix output;       // (vocab, hidden); token_embedding when tied

    // Throws gguf::GgufError naming the tensor when one is missing, has the
    // wrong shape or a type kvscope cannot compute with.
    static LlamaWeights from_gguf(const gguf::GgufFile& file, const LlamaConfig& config);

    // Bytes of weight data a forward pass reads (all matrices and norms).
    std::int64_t total_bytes() const;

    // Matrices repacked for this CPU's kernels (cpu::prepare_for_matmul)
    // live here; the others are views into the mapped file.
    std::vector<std::vector<std::byte>> packed_storage;
};

} // namespace kvscope::model
