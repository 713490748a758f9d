// SwiGLU's gate: gate <- silu(gate) * up, element-wise.
#pragma once

#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

void launch_silu_mul(float* gate, const float* up, std::int64_t count, cudaStream_t stream);

// The fused form the CUDA backend runs: gate_up (tokens, 2 * ffn), each row
// the gate's ffn values then the up's (one linear layer over both); out
// (tokens, ffn) = silu(gate) * up as fp16 (saturated), the down layer's input.
void launch_silu_mul_half(const float* gate_up, std::int64_t tokens, int ffn, __half* out,
                          cudaStream_t stream);

} // namespace kvscope::kernels
