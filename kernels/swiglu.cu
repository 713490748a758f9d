#include "kernels/cuda_check.cuh"
#include "kernels/grid_stride.cuh"
#include "kernels/nvtx_range.cuh"
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

} // namespace

// ---- Launcher -----------------------------------------------------------------

void launch_silu_mul(float* gate, const float* up, std::int64_t count, cudaStream_t stream) {
    NvtxRange range("silu_mul");
    if (count <= 0) {
        return;
    }
    silu_mul_kernel<<<grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(gate, up, count);
    KVSCOPE_CHECK_LAUNCH("silu_mul_kernel");
}

} // namespace kvscope::kernels
