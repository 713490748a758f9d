// Residual connection: x += y, element-wise.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

void launch_residual_add(float* x, const float* y, std::int64_t count, cudaStream_t stream);

} // namespace kvscope::kernels
