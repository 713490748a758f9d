// Residual connection: x += y, element-wise; and a bias added to every row.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

void launch_residual_add(float* x, const float* y, std::int64_t count, cudaStream_t stream);

// Adds `bias` (width) to each of the `rows` rows of x (rows, width): a linear
// layer's bias (Qwen2's Q, K and V).
void launch_add_bias(float* x, const float* bias, std::int64_t rows, int width,
                     cudaStream_t stream);

} // namespace kvscope::kernels
