// A matrix of the model as the GGUF file stores it, viewed in place in the
// memory map: the backend-neutral form of a weight. Each backend prepares its
// own form from it (the CPU packs rows for its kernels, a GPU dequantises to
// its device).
#pragma once

#include "engine/gguf/tensor_type.h"

#include <cstddef>
#include <cstdint>

namespace kvscope::model {

struct TensorView {
    gguf::TensorType type = gguf::TensorType::F32;
    std::int64_t rows = 0;     // output features
    std::int64_t cols = 0;     // input features (contiguous within a row)
    std::size_t row_bytes = 0; // bytes per row in `type`
    const std::byte* data = nullptr;

    std::int64_t bytes() const { return static_cast<std::int64_t>(row_bytes) * rows; }
};

} // namespace kvscope::model
