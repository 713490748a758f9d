#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/grid_stride.cuh"
#include "kernels/nvtx_range.h"
#include "kernels/residual_add.cuh"

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = 256;

__global__ void residual_add_kernel(float* __restrict__ x, const float* __restrict__ y,
                                    std::int64_t count) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < count; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        x[i] += y[i];
    }
}

__global__ void add_bias_kernel(float* __restrict__ x, const float* __restrict__ bias,
                                std::int64_t count, int width) {
    wait_for_previous_kernel();
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < count; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        x[i] += bias[i % width];
    }
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

void launch_residual_add(float* x, const float* y, std::int64_t count, cudaStream_t stream) {
    nvtx::Range range("residual_add");
    if (count <= 0) {
        return;
    }
    residual_add_kernel<<<grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(x, y, count);
    KVSCOPE_CHECK_LAUNCH("residual_add_kernel");
}

void launch_add_bias(float* x, const float* bias, std::int64_t rows, int width,
                     cudaStream_t stream) {
    nvtx::Range range("add_bias");
    const std::int64_t count = rows * width;
    if (count <= 0) {
        return;
    }
    launch_kernel("add_bias_kernel", add_bias_kernel, dim3(grid_stride_blocks(count, kThreads)),
                  dim3(kThreads), 0, stream, x, bias, count, width);
}

} // namespace kvscope::kernels
