#include "kernels/activation_overflow.h"
#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/half_store.cuh"
#include "kernels/nvtx_range.h"
#include "kernels/rms_norm.cuh"

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kBlockThreads = 256;

// 1 / rms of a row of `dim` values, reduced in fp32 across the block (one
// block per row), handed to every thread. Every thread of the block calls it.
// The row's values are read in each thread's strided order (i from
// threadIdx.x by blockDim.x), the order the callers write them in.
__device__ inline float block_inv_rms(const float* row, int dim, float eps) {
    __shared__ float warp_sums[kBlockThreads / 32];
    __shared__ float inv_rms;
    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        sum_sq += row[i] * row[i];
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
    }
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    if (lane == 0) {
        warp_sums[warp] = sum_sq;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int w = 0; w < kBlockThreads / 32; ++w) {
            total += warp_sums[w];
        }
        inv_rms = rsqrtf(total / static_cast<float>(dim) + eps);
    }
    __syncthreads();
    // A second call in the same kernel may follow: its warp sums are written
    // only after this call's last barrier (thread 0 read them before it),
    // and its inv_rms only after its own first barrier, which every thread
    // reaches after reading this one.
    return inv_rms;
}

// out = the normalised row (stored as Out), or with Accumulate, out += it
// (a post-norm before the residual add).
template <typename Out, bool Accumulate>
__device__ inline void store_normed(const float* row_in, float inv_rms, const float* weight,
                                    Out* row_out, int dim, unsigned int* overflows) {
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const float value = row_in[i] * inv_rms * weight[i];
        if constexpr (Accumulate) {
            row_out[i] += value;
        } else {
            store_activation(row_out + i, value, overflows);
        }
    }
}

// One block per row; the sum of squares is reduced in fp32 across the block.
// x is not __restrict__: out may alias it (the output head normalises in
// place), and a restrict-qualified x would let the compiler read it through
// the non-coherent cache as if nothing wrote it.
// Accumulate: out += the normalised row (a post-norm before the residual
// add), rather than out = it.
template <typename Out, bool Accumulate = false>
__global__ void rms_norm_kernel(const float* x, const float* __restrict__ weight, Out* out, int dim,
                                float eps, unsigned int* overflows) {
    wait_for_previous_kernel();
    const float* row_in = x + static_cast<size_t>(blockIdx.x) * dim;
    Out* row_out = out + static_cast<size_t>(blockIdx.x) * dim;
    const float inv_rms = block_inv_rms(row_in, dim, eps);
    store_normed<Out, Accumulate>(row_in, inv_rms, weight, row_out, dim, overflows);
}

// Gemma 3's post-norm into the residual stream, then the next norm into the
// next linear layer's fp16 input, one block per row: rms_norm_kernel<float,
// true> then rms_norm_kernel<__half> in one kernel, the same code, so the
// same bits. Each thread reads back only the x values it wrote itself.
__global__ void rms_norm_add_then_half_kernel(const float* __restrict__ h,
                                              const float* __restrict__ post_weight, float* x,
                                              const float* __restrict__ next_weight,
                                              __half* __restrict__ out, int dim, float eps,
                                              unsigned int* overflows) {
    wait_for_previous_kernel();
    const float* h_row = h + static_cast<size_t>(blockIdx.x) * dim;
    float* x_row = x + static_cast<size_t>(blockIdx.x) * dim;
    const float post_inv_rms = block_inv_rms(h_row, dim, eps);
    store_normed<float, true>(h_row, post_inv_rms, post_weight, x_row, dim, nullptr);
    const float next_inv_rms = block_inv_rms(x_row, dim, eps);
    store_normed<__half, false>(x_row, next_inv_rms, next_weight,
                                out + static_cast<size_t>(blockIdx.x) * dim, dim, overflows);
}

constexpr int kHeadRowsPerBlock = 4;

// A warp per (token, head) row of head_dim values, normalised in place: rows
// are short (64 to 256), so a block per row would leave most threads idle.
__global__ void rms_norm_heads_kernel(float* x, const float* __restrict__ weight, int heads,
                                      int head_dim, std::int64_t token_stride, int rows,
                                      float eps) {
    wait_for_previous_kernel();
    const int row =
        static_cast<int>(blockIdx.x) * kHeadRowsPerBlock + static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    if (row >= rows) {
        return; // the whole warp; no block-wide barrier follows
    }
    float* values =
        x + (row / heads) * token_stride + static_cast<std::int64_t>(row % heads) * head_dim;
    float sum_sq = 0.0f;
    for (int i = lane; i < head_dim; i += 32) {
        sum_sq += values[i] * values[i];
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
    }
    const float inv_rms = rsqrtf(sum_sq / static_cast<float>(head_dim) + eps);
    for (int i = lane; i < head_dim; i += 32) {
        values[i] = values[i] * inv_rms * weight[i];
    }
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

void launch_rms_norm(const float* x, const float* weight, float* out, int rows, int dim, float eps,
                     cudaStream_t stream) {
    nvtx::Range range("rms_norm");
    if (rows <= 0 || dim <= 0) {
        return;
    }
    launch_kernel("rms_norm_kernel", rms_norm_kernel<float>, dim3(rows), dim3(kBlockThreads), 0,
                  stream, x, weight, out, dim, eps, nullptr);
}

void launch_rms_norm_half(const float* x, const float* weight, __half* out, int rows, int dim,
                          float eps, cudaStream_t stream) {
    nvtx::Range range("rms_norm");
    if (rows <= 0 || dim <= 0) {
        return;
    }
    launch_kernel("rms_norm_kernel", rms_norm_kernel<__half>, dim3(rows), dim3(kBlockThreads), 0,
                  stream, x, weight, out, dim, eps, activation_overflow_counter());
}

void launch_rms_norm_add(const float* h, const float* weight, float* x, int rows, int dim,
                         float eps, cudaStream_t stream) {
    nvtx::Range range("rms_norm_add");
    if (rows <= 0 || dim <= 0) {
        return;
    }
    launch_kernel("rms_norm_kernel", rms_norm_kernel<float, true>, dim3(rows), dim3(kBlockThreads),
                  0, stream, h, weight, x, dim, eps, nullptr);
}

void launch_rms_norm_add_then_half(const float* h, const float* post_weight, float* x,
                                   const float* next_weight, __half* out, int rows, int dim,
                                   float eps, cudaStream_t stream) {
    nvtx::Range range("rms_norm_add_then_half");
    if (rows <= 0 || dim <= 0) {
        return;
    }
    launch_kernel("rms_norm_add_then_half_kernel", rms_norm_add_then_half_kernel, dim3(rows),
                  dim3(kBlockThreads), 0, stream, h, post_weight, x, next_weight, out, dim, eps,
                  activation_overflow_counter());
}

void launch_rms_norm_heads(float* x, const float* weight, int tokens, int heads, int head_dim,
                           std::int64_t token_stride, float eps, cudaStream_t stream) {
    nvtx::Range range("rms_norm_heads");
    const int rows = tokens * heads;
    if (rows <= 0 || head_dim <= 0) {
        return;
    }
    const int blocks = (rows + kHeadRowsPerBlock - 1) / kHeadRowsPerBlock;
    launch_kernel("rms_norm_heads_kernel", rms_norm_heads_kernel, dim3(blocks),
                  dim3(kHeadRowsPerBlock * 32), 0, stream, x, weight, heads, head_dim, token_stride,
                  rows, eps);
}

} // namespace kvscope::kernels
