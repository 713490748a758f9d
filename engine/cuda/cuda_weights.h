// The model's weights on one GPU, in the form the CUDA backend computes with:
// every matrix dequantised from its GGUF type to fp16 (the cuBLAS linear
// layers' input type), the norms in fp32. Prepared once per model, kept by
// the model (LlamaModel::prepared) and shared by every CUDA backend of it.
#pragma once

#include "engine/cuda/cublas_linear.h"
#include "engine/cuda/device_buffer.h"
#include "engine/model/llama_model.h"

#include <cstdint>
#include <cuda_fp16.h>
#include <memory>
#include <vector>

namespace kvscope::cuda {

// The projections that read the same input are stacked into one matrix, so
// one matrix product computes them (wqkv, w_gate_up); the single ones are
// views of its rows.
// The optional vectors (a bias, a QK norm, a post-norm) are null where the
// architecture has none (model/architecture.h).
struct CudaLayerWeights {
    const float* attn_norm = nullptr; // (hidden)
    const float* qkv_bias = nullptr;  // ((heads + 2 kv_heads) * head_dim): q, k, v biases
    const float* q_bias = nullptr;    // views of qkv_bias
    const float* k_bias = nullptr;
    const float* v_bias = nullptr;
    const float* q_norm = nullptr;         // (head_dim): each query head's RMSNorm
    const float* k_norm = nullptr;         // (head_dim): each key head's
    const float* post_attn_norm = nullptr; // (hidden): of the attention's output
    HalfMatrix wqkv;                       // ((heads + 2 kv_heads) * head_dim, hidden): wq, wk, wv
    HalfMatrix wq;                         // (heads * head_dim, hidden)
    HalfMatrix wk;                         // (kv_heads * head_dim, hidden)
    HalfMatrix wv;                         // (kv_heads * head_dim, hidden)
    HalfMatrix wo;                         // (hidden, heads * head_dim)
    const float* ffn_norm = nullptr;       // (hidden)
    HalfMatrix w_gate_up;                  // (2 ffn_hidden, hidden): w_gate, w_up
    HalfMatrix w_gate;                     // (ffn_hidden, hidden)
    HalfMatrix w_up;                       // (ffn_hidden, hidden)
    HalfMatrix w_down;                     // (hidden, ffn_hidden)
    const float* post_ffn_norm = nullptr;  // (hidden): of the FFN's output
};

class CudaWeights {
public:
    // The device weights of `model`, uploaded to `device` on first use and
    // kept by the model. Thread-safe. Throws std::runtime_error when they
    // are already on another device (one model, one GPU per process).
    static std::shared_ptr<const CudaWeights> of(const model::LlamaModel& model, int device);

    // Uploads a private copy (what of() shares) to `device`; returns once
    // the copies are complete. Throws kernels::CudaError (out of memory, no
    // device) or std::runtime_error (a weight beyond fp16's range).
    CudaWeights(const model::LlamaModel& model, int device);
    CudaWeights(const CudaWeights&) = delete;
    CudaWeights& operator=(const CudaWeights&) = delete;

    int device() const { return device_; }
    // Device bytes the weights take.
    std::int64_t bytes() const { return bytes_; }

    HalfMatrix token_embedding; // (vocab, hidden)
    std::vector<CudaLayerWeights> layers;
    const float* output_norm = nullptr; // (hidden)
    HalfMatrix output;                  // (vocab, hidden); token_embedding when tied

private:
    HalfMatrix upload_matrix(const model::TensorView& tensor, const std::string& name);
    // The tensors' rows one after another in one matrix (equal widths).
    HalfMatrix upload_stacked(const std::vector<const model::TensorView*>& tensors,
                              const std::string& name);
    // Null for an empty vector (a weight the architecture does not have).
    const float* upload_norm(const std::vector<float>& norm);

    int device_ = 0;
    std::int64_t bytes_ = 0;
    std::vector<DeviceBuffer<__half>> matrices_;
    std::vector<DeviceBuffer<float>> norms_;
};

} // namespace kvscope::cuda
