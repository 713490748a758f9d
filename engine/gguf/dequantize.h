// Conversion of GGUF tensor data to fp32, one row (or any whole number of
// blocks) at a time. Layouts follow the ggml block formats.
#pragma once

#include "engine/gguf/tensor_type.h"

#include <cstddef>
#include <cstdint>

namespace kvscope::gguf {

// Whether dequantize_values() handles `type`.
bool can_dequantize(TensorType type);

// Converts `count` values (a multiple of the type's block size) starting at
// `src` to fp32 in `dst`. Throws std::invalid_argument for an unsupported type
// or a count that is not a whole number of blocks.
void dequantize_values(TensorType type, const std::byte* src, float* dst, std::int64_t count);

} // namespace kvscope::gguf
