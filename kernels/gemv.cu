#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/gemv.cuh"
#include "kernels/nvtx_range.h"

#include <cstdint>
#include <stdexcept>

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = 128;
constexpr int kRowsPerBlock = kThreads / 32;
// Chunks of 16 bytes of its row's weights each lane loads before waiting for
// the kernel before it (weights are never written during a step): the whole
// row of a 1024-wide layer, two thirds of SmolLM2's 1536-wide one.
constexpr int kHeldChunks = 4;

// fp32 dot product of 8 fp16 pairs held in two 16-byte words.
__device__ inline float dot8(const uint4& a, const uint4& b) {
    const __half2* ha = reinterpret_cast<const __half2*>(&a);
    const __half2* hb = reinterpret_cast<const __half2*>(&b);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 fa = __half22float2(ha[i]);
        const float2 fb = __half22float2(hb[i]);
        sum = fmaf(fa.x, fb.x, sum);
        sum = fmaf(fa.y, fb.y, sum);
    }
    return sum;
}

// A warp per output row: each lane takes every 32nd 16-byte chunk of the
// row's weights and dots it with the same chunk of each token's input, then
// the lanes' sums meet by shuffles. The first kHeldChunks chunks are loaded
// before the wait for the kernel before (dependent_launch.cuh).
template <int T>
__global__ void __launch_bounds__(kThreads)
    gemv_kernel(const __half* __restrict__ w, int rows, int cols, const __half* x,
                float* __restrict__ y, bool accumulate) {
    const int row =
        static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    if (row >= rows) {
        return; // the whole warp; no block-wide barrier follows
    }
    const int chunks = cols / 8;
    const uint4* w_row = reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(row) * cols);
    uint4 held[kHeldChunks];
#pragma unroll
    for (int i = 0; i < kHeldChunks; ++i) {
        const int c = lane + 32 * i;
        held[i] = c < chunks ? __ldg(w_row + c) : make_uint4(0, 0, 0, 0);
    }
    wait_for_previous_kernel();
    // The inputs another kernel wrote, read only after the wait.
    const uint4* input = reinterpret_cast<const uint4*>(x);
    float acc[T] = {};
#pragma unroll
    for (int i = 0; i < kHeldChunks; ++i) {
        const int c = lane + 32 * i;
        if (c < chunks) {
#pragma unroll
            for (int t = 0; t < T; ++t) {
                acc[t] += dot8(held[i], input[t * chunks + c]);
            }
        }
    }
#pragma unroll 2
    for (int c = lane + 32 * kHeldChunks; c < chunks; c += 32) {
        const uint4 weights = __ldg(w_row + c);
#pragma unroll
        for (int t = 0; t < T; ++t) {
            acc[t] += dot8(weights, input[t * chunks + c]);
        }
    }
#pragma unroll
    for (int t = 0; t < T; ++t) {
        float sum = acc[t];
        for (int offset = 16; offset > 0; offset /= 2) {
            sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        }
        if (lane == 0) {
            float* out = y + static_cast<std::int64_t>(t) * rows + row;
            *out = accumulate ? *out + sum : sum;
        }
    }
}

template <int T>
void launch_tokens(const __half* w, int rows, int cols, const __half* x, float* y, bool accumulate,
                   cudaStream_t stream) {
    const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    launch_kernel("gemv_kernel", gemv_kernel<T>, dim3(blocks), dim3(kThreads), 0, stream, w, rows,
                  cols, x, y, accumulate);
}

bool aligned16(const void* pointer) {
    return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

bool gemv_fits(const __half* w, const __half* x, int tokens, int cols) {
    return tokens >= 1 && tokens <= kGemvMaxTokens && cols > 0 && cols % 8 == 0 && aligned16(w) &&
           aligned16(x);
}

void launch_gemv(const __half* w, int rows, int cols, const __half* x, int tokens, float* y,
                 bool accumulate, cudaStream_t stream) {
    nvtx::Range range("gemv");
    if (!gemv_fits(w, x, tokens, cols) || rows <= 0) {
        throw std::invalid_argument("gemv: 1 to 8 tokens, a width that is a multiple of 8 and "
                                    "16-byte aligned operands are needed");
    }
    switch (tokens) { // the count is a template argument: the sums stay in registers
    case 1:
        return launch_tokens<1>(w, rows, cols, x, y, accumulate, stream);
    case 2:
        return launch_tokens<2>(w, rows, cols, x, y, accumulate, stream);
    case 3:
        return launch_tokens<3>(w, rows, cols, x, y, accumulate, stream);
    case 4:
        return launch_tokens<4>(w, rows, cols, x, y, accumulate, stream);
    case 5:
        return launch_tokens<5>(w, rows, cols, x, y, accumulate, stream);
    case 6:
        return launch_tokens<6>(w, rows, cols, x, y, accumulate, stream);
    case 7:
        return launch_tokens<7>(w, rows, cols, x, y, accumulate, stream);
    default:
        return launch_tokens<8>(w, rows, cols, x, y, accumulate, stream);
    }
}

} // namespace kvscope::kernels
