#include "kernels/activation_overflow.h"
#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/gated_activation.cuh"
#include "kernels/grid_stride.cuh"
#include "kernels/nvtx_range.h"
#include "kernels/swiglu.cuh"

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = 256;

__global__ void silu_mul_kernel(float* __restrict__ gate, const float* __restrict__ up,
                                std::int64_t count) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < count; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i]; // as the CPU's silu_mul
    }
}

// gate_up rows are (gate (ffn), up (ffn)), one per token, as the fused
// gate_up linear layer writes them; out (tokens, ffn). GeluTanh: GeGLU
// (Gemma), else SwiGLU; the activations are the CPU's (activation_math.h).
template <bool GeluTanh>
__global__ void gated_half_kernel(const float* __restrict__ gate_up, std::int64_t tokens, int ffn,
                                  __half* __restrict__ out, unsigned int* overflows) {
    wait_for_previous_kernel();
    const std::int64_t count = tokens * ffn;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < count; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t token = i / ffn;
        const std::int64_t j = i % ffn;
        const float g = gate_up[token * 2 * ffn + j];
        const float u = gate_up[token * 2 * ffn + ffn + j];
        out[i] = gated_activation(GeluTanh, g, u, overflows);
    }
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

void launch_silu_mul(float* gate, const float* up, std::int64_t count, cudaStream_t stream) {
    nvtx::Range range("silu_mul");
    if (count <= 0) {
        return;
    }
    silu_mul_kernel<<<grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(gate, up, count);
    KVSCOPE_CHECK_LAUNCH("silu_mul_kernel");
}

void launch_gated_half(const float* gate_up, std::int64_t tokens, int ffn, bool gelu_tanh,
                       __half* out, cudaStream_t stream) {
    nvtx::Range range(gelu_tanh ? "gelu_mul" : "silu_mul");
    if (tokens <= 0 || ffn <= 0) {
        return;
    }
    const unsigned blocks = grid_stride_blocks(tokens * ffn, kThreads);
    launch_kernel("gated_half_kernel",
                  gelu_tanh ? gated_half_kernel<true> : gated_half_kernel<false>, dim3(blocks),
                  dim3(kThreads), 0, stream, gate_up, tokens, ffn, out,
                  activation_overflow_counter());
}

} // namespace kvscope::kernels
