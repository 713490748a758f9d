// RMSNorm: out = x / sqrt(mean(x^2) + eps) * weight, one row per token.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

// x, out: (rows, dim) row-major fp32; weight: (dim) fp32. out may alias x.
void launch_rms_norm(const float* x, const float* weight, float* out, int rows, int dim, float eps,
                     cudaStream_t stream);

// The same, written as fp16 (saturated) for the next linear layer: the
// norm and the cast in one kernel.
void launch_rms_norm_half(const float* x, const float* weight, __half* out, int rows, int dim,
                          float eps, cudaStream_t stream);

} // namespace kvscope::kernels
