// The model's weights in the form the CPU kernels read: Q4_0, Q4_1 and Q8_0
// matrices repacked (packed_rows.h) where the fused kernels run, the other
// types viewed in place in the mapped file. Prepared once per model, kept by
// the model (LlamaModel::prepared) and shared by every CPU backend of it.
#pragma once

#include "engine/cpu/matmul.h"
#include "engine/model/llama_model.h"

#include <memory>
#include <span>
#include <vector>

namespace kvscope::cpu {

struct CpuLayerWeights {
    const model::LayerWeights* vectors; // its norms and biases, used as the model holds them
    WeightMatrix wq;                    // (heads * head_dim, hidden)
    WeightMatrix wk;                    // (kv_heads * head_dim, hidden)
    WeightMatrix wv;                    // (kv_heads * head_dim, hidden)
    WeightMatrix wo;                    // (hidden, heads * head_dim)
    WeightMatrix w_gate;                // (ffn_hidden, hidden)
    WeightMatrix w_up;                  // (ffn_hidden, hidden)
    WeightMatrix w_down;                // (hidden, ffn_hidden)
};

class CpuWeights {
public:
    // The prepared weights of `model`, made on first use and kept by it.
    // Thread-safe.
    static std::shared_ptr<const CpuWeights> of(const model::LlamaModel& model);

    // Prepares a private copy (what of() shares); it views `model`, which
    // must outlive it.
    explicit CpuWeights(const model::LlamaModel& model);
    CpuWeights(const CpuWeights&) = delete;
    CpuWeights& operator=(const CpuWeights&) = delete;

    WeightMatrix token_embedding; // (vocab, hidden)
    std::vector<CpuLayerWeights> layers;
    std::span<const float> output_norm; // (hidden)
    WeightMatrix output;                // (vocab, hidden); token_embedding when tied

private:
    std::vector<std::vector<std::byte>> packed_storage_;
};

// A GGUF matrix as the kernels' view of it, in the file's layout.
WeightMatrix as_weight_matrix(const model::TensorView& tensor);

} // namespace kvscope::cpu
