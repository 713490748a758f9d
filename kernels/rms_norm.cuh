// RMSNorm: out = x / sqrt(mean(x^2) + eps) * weight, one row per token.
#pragma once

#include <cuda_runtime_api.h>

namespace kvscope::kernels {

// x, out: (rows, dim) row-major fp32; weight: (dim) fp32. out may alias x.
void launch_rms_norm(const float* x, const float* weight, float* out, int rows, int dim, float eps,
                     cudaStream_t stream);

} // namespace kvscope::kernels
