#include "engine/cuda/cuda_weights.h"

#include "engine/gguf/dequantize.h"
#include "kernels/cuda_check.cuh"
#include "kernels/math/half.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace kvscope::cuda {

namespace {

// Rows converted per upload: bounds the host memory a large matrix (the
// embedding) needs while converting to a few MiB.
constexpr std::int64_t kChunkValues = std::int64_t{4} << 20;

} // namespace

CudaWeights::CudaWeights(const model::LlamaModel& model, int device)
    : device_(device) {
    KVSCOPE_CUDA_CHECK(cudaSetDevice(device));
    const model::LlamaWeights& w = model.weights();
    token_embedding = upload_matrix(w.token_embedding, "token_embd");
    layers.reserve(w.layers.size());
    for (std::size_t i = 0; i < w.layers.size(); ++i) {
        const model::LayerWeights& l = w.layers[i];
        const std::string blk = "blk." + std::to_string(i) + ".";
        CudaLayerWeights layer;
        layer.attn_norm = upload_norm(l.attn_norm);
        if (!l.q_bias.empty()) { // one vector, as the fused QKV rows are laid out
            std::vector<float> bias = l.q_bias;
            bias.insert(bias.end(), l.k_bias.begin(), l.k_bias.end());
            bias.insert(bias.end(), l.v_bias.begin(), l.v_bias.end());
            layer.qkv_bias = upload_norm(bias);
            layer.q_bias = layer.qkv_bias;
            layer.k_bias = layer.q_bias + l.q_bias.size();
            layer.v_bias = layer.k_bias + l.k_bias.size();
        }
        layer.q_norm = upload_norm(l.q_norm);
        layer.k_norm = upload_norm(l.k_norm);
        layer.post_attn_norm = upload_norm(l.post_attn_norm);
        layer.post_ffn_norm = upload_norm(l.post_ffn_norm);
        layer.wqkv = upload_stacked({&l.wq, &l.wk, &l.wv}, blk + "attn_q/k/v");
        const int q_rows = static_cast<int>(l.wq.rows);
        const int kv_rows = static_cast<int>(l.wk.rows);
        layer.wq = matrix_rows(layer.wqkv, 0, q_rows);
        layer.wk = matrix_rows(layer.wqkv, q_rows, kv_rows);
        layer.wv = matrix_rows(layer.wqkv, q_rows + kv_rows, static_cast<int>(l.wv.rows));
        layer.wo = upload_matrix(l.wo, blk + "attn_output");
        layer.ffn_norm = upload_norm(l.ffn_norm);
        layer.w_gate_up = upload_stacked({&l.w_gate, &l.w_up}, blk + "ffn_gate/up");
        const int ffn_rows = static_cast<int>(l.w_gate.rows);
        layer.w_gate = matrix_rows(layer.w_gate_up, 0, ffn_rows);
        layer.w_up = matrix_rows(layer.w_gate_up, ffn_rows, static_cast<int>(l.w_up.rows));
        layer.w_down = upload_matrix(l.w_down, blk + "ffn_down");
        layers.push_back(layer);
    }
    output_norm = upload_norm(w.output_norm);
    // Tied embeddings: one matrix on the device, not two.
    output = w.output.data == w.token_embedding.data ? token_embedding
                                                     : upload_matrix(w.output, "output");
    // cudaMemcpy from pageable memory may return before the DMA lands, and
    // the backends' non-blocking streams do not wait on the legacy stream:
    // the weights are complete only after this.
    KVSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
}

HalfMatrix CudaWeights::upload_matrix(const model::TensorView& tensor, const std::string& name) {
    return upload_stacked({&tensor}, name);
}

HalfMatrix CudaWeights::upload_stacked(const std::vector<const model::TensorView*>& tensors,
                                       const std::string& name) {
    std::int64_t rows = 0;
    const std::int64_t cols = tensors.front()->cols;
    for (const model::TensorView* tensor : tensors) {
        if (tensor->rows <= 0 || tensor->cols <= 0 || tensor->data == nullptr) {
            throw std::runtime_error("weight " + name + " is empty");
        }
        if (tensor->cols != cols) {
            throw std::runtime_error("weights " + name +
                                     " differ in width: " + std::to_string(tensor->cols) +
                                     " against " + std::to_string(cols));
        }
        rows += tensor->rows;
    }
    DeviceBuffer<__half> device(static_cast<std::size_t>(rows * cols));
    const std::int64_t chunk_rows = std::max<std::int64_t>(1, kChunkValues / cols);
    std::vector<float> row(static_cast<std::size_t>(cols));
    std::vector<std::uint16_t> halves(static_cast<std::size_t>(std::min(chunk_rows, rows) * cols));
    std::int64_t device_row = 0; // where the tensor's rows go in the stacked matrix
    for (const model::TensorView* tensor_pointer : tensors) {
        const std::string part =
            tensors.size() > 1 ? " (part " + std::to_string(&tensor_pointer - &tensors[0] + 1) +
                                     " of " + std::to_string(tensors.size()) + ")"
                               : "";
        const model::TensorView& tensor = *tensor_pointer;
        for (std::int64_t first = 0; first < tensor.rows; first += chunk_rows) {
            const std::int64_t count = std::min(chunk_rows, tensor.rows - first);
            for (std::int64_t r = 0; r < count; ++r) {
                gguf::dequantize_values(tensor.type, tensor.data + (first + r) * tensor.row_bytes,
                                        row.data(), tensor.cols);
                std::uint16_t* out = halves.data() + r * tensor.cols;
                for (std::int64_t c = 0; c < tensor.cols; ++c) {
                    const float value = row[static_cast<std::size_t>(c)];
                    out[c] = fp32_to_fp16(value);
                    // 0x7c00 with the sign masked off: a finite weight that fp16
                    // turned into infinity would poison every logit downstream.
                    if ((out[c] & 0x7fffu) == 0x7c00u && std::isfinite(value)) {
                        throw std::runtime_error(
                            "weight " + name + part + " holds " + std::to_string(value) + " at (" +
                            std::to_string(first + r) + ", " + std::to_string(c) +
                            "), beyond fp16's range: the CUDA backend computes in fp16");
                    }
                }
            }
            KVSCOPE_CUDA_CHECK(
                cudaMemcpy(device.data() + (device_row + first) * cols, halves.data(),
                           static_cast<std::size_t>(count * cols) * sizeof(std::uint16_t),
                           cudaMemcpyHostToDevice));
        }
        device_row += tensor.rows;
    }
    const HalfMatrix matrix{device.data(), static_cast<int>(rows), static_cast<int>(cols)};
    bytes_ += static_cast<std::int64_t>(device.bytes());
    matrices_.push_back(std::move(device));
    return matrix;
}

const float* CudaWeights::upload_norm(const std::vector<float>& norm) {
    if (norm.empty()) {
        return nullptr;
    }
    DeviceBuffer<float> device(norm.size());
    KVSCOPE_CUDA_CHECK(
        cudaMemcpy(device.data(), norm.data(), device.bytes(), cudaMemcpyHostToDevice));
    const float* data = device.data();
    bytes_ += static_cast<std::int64_t>(device.bytes());
    norms_.push_back(std::move(device));
    return data;
}

std::shared_ptr<const CudaWeights> CudaWeights::of(const model::LlamaModel& model, int device) {
    std::shared_ptr<const CudaWeights> weights = model.prepared<CudaWeights>(
        [&model, device] { return std::make_shared<CudaWeights>(model, device); });
    if (weights->device() != device) {
        throw std::runtime_error("the model's weights are on CUDA device " +
                                 std::to_string(weights->device()) + ", not " +
                                 std::to_string(device) + ": one process runs a model on one GPU");
    }
    return weights;
}

} // namespace kvscope::cuda
