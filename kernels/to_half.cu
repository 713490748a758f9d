#include "kernels/activation_overflow.h"
#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/grid_stride.cuh"
#include "kernels/half_store.cuh"
#include "kernels/nvtx_range.h"
#include "kernels/to_half.cuh"

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = 256;

__global__ void to_half_kernel(const float* __restrict__ in, __half* __restrict__ out,
                               std::int64_t count, unsigned int* overflows) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < count; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        out[i] = to_half_saturated(in[i], overflows);
    }
}

// One block per gathered row.
__global__ void gather_rows_kernel(const float* __restrict__ in,
                                   const std::int32_t* __restrict__ rows, int width,
                                   float* __restrict__ out) {
    wait_for_previous_kernel();
    const float* src = in + static_cast<std::int64_t>(rows[blockIdx.x]) * width;
    float* dst = out + static_cast<std::int64_t>(blockIdx.x) * width;
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        dst[i] = src[i];
    }
}

} // namespace

// ---- Launchers ----------------------------------------------------------------

void launch_to_half(const float* in, __half* out, std::int64_t count, cudaStream_t stream) {
    nvtx::Range range("to_half");
    if (count <= 0) {
        return;
    }
    to_half_kernel<<<grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(
        in, out, count, activation_overflow_counter());
    KVSCOPE_CHECK_LAUNCH("to_half_kernel");
}

void launch_gather_rows(const float* in, const std::int32_t* rows, int count, int width, float* out,
                        cudaStream_t stream) {
    nvtx::Range range("gather_rows");
    if (count <= 0 || width <= 0) {
        return;
    }
    launch_kernel("gather_rows_kernel", gather_rows_kernel, dim3(count), dim3(kThreads), 0, stream,
                  in, rows, width, out);
}

} // namespace kvscope::kernels
