// The gated FFN's activation: gate <- silu(gate) * up (SwiGLU) element-wise,
// or gelu_tanh(gate) * up (GeGLU).
#pragma once

#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

void launch_silu_mul(float* gate, const float* up, std::int64_t count, cudaStream_t stream);

// The form the CUDA backend runs after a cuBLAS gate/up product (the GEMV's
// and the tile GEMM's gated epilogues replace it where they compute the
// product: launch_gemv_gated, launch_tile_gemm_gated): gate_up (tokens, 2 * ffn), each row
// the gate's ffn values then the up's (one linear layer over both); out
// (tokens, ffn) = silu(gate) * up, or gelu_tanh(gate) * up where `gelu_tanh`
// (Gemma's GeGLU), as fp16 (saturated), the down layer's input.
void launch_gated_half(const float* gate_up, std::int64_t tokens, int ffn, bool gelu_tanh,
                       __half* out, cudaStream_t stream);

} // namespace kvscope::kernels
