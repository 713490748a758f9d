// RMSNorm: out = x / sqrt(mean(x^2) + eps) * weight, one row per token.
#pragma once

#include <cstdint>
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

// x += rms_norm(h) * weight, row by row: a post-norm (Gemma 3's after its
// attention and FFN) and the residual add in one kernel. h, x: (rows, dim).
void launch_rms_norm_add(const float* h, const float* weight, float* x, int rows, int dim,
                         float eps, cudaStream_t stream);

// launch_rms_norm_add(h, post_weight, x) then launch_rms_norm_half(x,
// next_weight, out) in one kernel, the same bits (and saturated values
// counted alike): Gemma 3's post-attention norm into the residual stream and
// its pre-FFN norm, a kernel a layer fewer. out (rows, dim) fp16. h, x and
// out must not overlap (unlike launch_rms_norm's in-place use).
void launch_rms_norm_add_then_half(const float* h, const float* post_weight, float* x,
                                   const float* next_weight, __half* out, int rows, int dim,
                                   float eps, cudaStream_t stream);

// Each head of each token normalised in place over its head_dim values (the
// QK norms of Qwen3 and Gemma 3): head h of token t starts at
// x + t * token_stride + h * head_dim; weight: (head_dim).
void launch_rms_norm_heads(float* x, const float* weight, int tokens, int heads, int head_dim,
                           std::int64_t token_stride, float eps, cudaStream_t stream);

} // namespace kvscope::kernels
