#include "engine/cpu/cpu_weights.h"

namespace kvscope::cpu {

WeightMatrix as_weight_matrix(const model::TensorView& tensor) {
    WeightMatrix w;
    static_cast<model::TensorView&>(w) = tensor;
    return w;
}

CpuWeights::CpuWeights(const model::LlamaModel& model) {
    const model::LlamaWeights& w = model.weights();
    // Each matrix in the layout the kernels run fastest; moved-from vectors
    // keep their buffers, so the views stay valid.
    const auto prepared = [this](const model::TensorView& tensor) {
        std::vector<std::byte> storage;
        const WeightMatrix ready = prepare_for_matmul(as_weight_matrix(tensor), storage);
        if (!storage.empty()) {
            packed_storage_.push_back(std::move(storage));
        }
        return ready;
    };
    token_embedding = prepared(w.token_embedding);
    layers.reserve(w.layers.size());
    for (const model::LayerWeights& l : w.layers) {
        layers.push_back({&l, prepared(l.wq), prepared(l.wk), prepared(l.wv), prepared(l.wo),
                          prepared(l.w_gate), prepared(l.w_up), prepared(l.w_down)});
    }
    output_norm = w.output_norm;
    // Tied embeddings: one matrix, packed once.
    output = w.output.data == w.token_embedding.data ? token_embedding : prepared(w.output);
}

std::shared_ptr<const CpuWeights> CpuWeights::of(const model::LlamaModel& model) {
    return model.prepared<CpuWeights>([&model] { return std::make_shared<CpuWeights>(model); });
}

} // namespace kvscope::cpu
