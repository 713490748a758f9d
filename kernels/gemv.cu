#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/gemv.cuh"
#include "kernels/half_store.cuh"
#include "kernels/math/activation_math.h"
#include "kernels/nvtx_range.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = 128;
constexpr int kRowsPerBlock = kThreads / 32;
// Chunks of 16 bytes of its row's weights each lane loads before waiting for
// the kernel before it (weights are never written during a step): the whole
// row of a 1024-wide layer, the first half of SmolLM2's 1536-wide one.
constexpr int kHeldChunks = 4;
// fp16 input values the fused variants stage: 48 KiB, the shared memory a
// block gets without opting in.
constexpr int kMaxStagedValues = 24 * 1024;

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

// Input sources: stage<T>() returns the tokens' fp16 rows, (T, cols) in
// 16-byte chunks. Called by the whole block after the wait for the kernel
// before; a source that computes its rows writes them into `staged` (shared
// memory) and ends with a barrier.

// Rows another kernel wrote (an fp16 activation buffer).
struct HalfRows {
    const __half* x;

    template <int T>
    __device__ const uint4* stage(uint4*, int) const {
        return reinterpret_cast<const uint4*>(x);
    }
};

// The RMSNorm of fp32 rows, as rms_norm_kernel computes it (x * inv_rms *
// weight, saturated to fp16); only the order of the sum of squares differs.
struct NormedRows {
    const float* x;
    const float* weight;
    float eps;

    template <int T>
    __device__ const uint4* stage(uint4* staged, int cols) const {
        __shared__ float warp_sums[kRowsPerBlock][T];
        __shared__ float inv_rms[T];
        const int tid = static_cast<int>(threadIdx.x);
        float sum_sq[T];
#pragma unroll
        for (int t = 0; t < T; ++t) {
            const float* row = x + static_cast<std::int64_t>(t) * cols;
            sum_sq[t] = 0.0f;
            for (int i = tid; i < cols; i += kThreads) {
                sum_sq[t] += row[i] * row[i];
            }
            for (int offset = 16; offset > 0; offset /= 2) {
                sum_sq[t] += __shfl_xor_sync(0xffffffffu, sum_sq[t], offset);
            }
            if (tid % 32 == 0) {
                warp_sums[tid / 32][t] = sum_sq[t];
            }
        }
        __syncthreads();
        if (tid < T) {
            float total = 0.0f;
            for (int w = 0; w < kRowsPerBlock; ++w) {
                total += warp_sums[w][tid];
            }
            inv_rms[tid] = rsqrtf(total / static_cast<float>(cols) + eps);
        }
        __syncthreads();
        __half* out = reinterpret_cast<__half*>(staged);
        for (int t = 0; t < T; ++t) {
            const float* row = x + static_cast<std::int64_t>(t) * cols;
            for (int i = tid; i < cols; i += kThreads) {
                out[t * cols + i] = to_half_saturated(row[i] * inv_rms[t] * weight[i]);
            }
        }
        __syncthreads();
        return staged;
    }
};

// The gated activation of gate_up rows, as gated_half_kernel computes it.
template <bool GeluTanh>
struct GatedRows {
    const float* gate_up;

    template <int T>
    __device__ const uint4* stage(uint4* staged, int cols) const {
        __half* out = reinterpret_cast<__half*>(staged);
        for (int i = static_cast<int>(threadIdx.x); i < T * cols; i += kThreads) {
            const int t = i / cols;
            const int j = i % cols;
            const float g = gate_up[static_cast<std::int64_t>(t) * 2 * cols + j];
            const float u = gate_up[static_cast<std::int64_t>(t) * 2 * cols + cols + j];
            out[i] = to_half_saturated((GeluTanh ? math::gelu_tanh(g) : math::silu(g)) * u);
        }
        __syncthreads();
        return staged;
    }
};

// A warp per output row: each lane takes every 32nd 16-byte chunk of the
// row's weights and dots it with the same chunk of each token's input, then
// the lanes' sums meet by shuffles. The first kHeldChunks chunks are loaded
// before the wait for the kernel before (dependent_launch.cuh).
template <int T, typename Source>
__global__ void __launch_bounds__(kThreads)
    gemv_kernel(const __half* __restrict__ w, int rows, int cols, Source source,
                float* __restrict__ y, bool accumulate) {
    extern __shared__ uint4 staged[]; // (T, cols / 8) chunks, for the sources that compute
    const int row =
        static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const bool has_row = row < rows; // no early return: stage() may hold barriers
    const int chunks = cols / 8;
    const uint4* w_row =
        reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(has_row ? row : 0) * cols);
    uint4 held[kHeldChunks];
#pragma unroll
    for (int i = 0; i < kHeldChunks; ++i) {
        const int c = lane + 32 * i;
        held[i] = has_row && c < chunks ? __ldg(w_row + c) : make_uint4(0, 0, 0, 0);
    }
    wait_for_previous_kernel();
    const uint4* input = source.template stage<T>(staged, cols);
    if (!has_row) {
        return; // after every barrier
    }
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

template <int T, typename Source>
void launch_tokens(const __half* w, int rows, int cols, const Source& source, float* y,
                   bool accumulate, cudaStream_t stream) {
    const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    const std::size_t shared_bytes =
        std::is_same_v<Source, HalfRows> ? 0 : static_cast<std::size_t>(T) * cols * sizeof(__half);
    launch_kernel("gemv_kernel", gemv_kernel<T, Source>, dim3(blocks), dim3(kThreads), shared_bytes,
                  stream, w, rows, cols, source, y, accumulate);
}

// The token count is a template argument: the sums stay in registers.
template <typename Source>
void launch_source(const __half* w, int rows, int cols, const Source& source, int tokens, float* y,
                   bool accumulate, cudaStream_t stream) {
    switch (tokens) {
    case 1:
        return launch_tokens<1>(w, rows, cols, source, y, accumulate, stream);
    case 2:
        return launch_tokens<2>(w, rows, cols, source, y, accumulate, stream);
    case 3:
        return launch_tokens<3>(w, rows, cols, source, y, accumulate, stream);
    case 4:
        return launch_tokens<4>(w, rows, cols, source, y, accumulate, stream);
    case 5:
        return launch_tokens<5>(w, rows, cols, source, y, accumulate, stream);
    case 6:
        return launch_tokens<6>(w, rows, cols, source, y, accumulate, stream);
    case 7:
        return launch_tokens<7>(w, rows, cols, source, y, accumulate, stream);
    default:
        return launch_tokens<8>(w, rows, cols, source, y, accumulate, stream);
    }
}

bool aligned16(const void* pointer) {
    return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

void check_fused_fits(const __half* w, int rows, int tokens, int cols, const char* what) {
    if (!gemv_fused_fits(w, tokens, cols) || rows <= 0) {
        throw std::invalid_argument(
            std::string(what) +
            ": 1 to 8 tokens, a width that is a multiple of 8, 16-byte aligned weights and at "
            "most 24576 input values are needed");
    }
}

} // namespace

// ---- Launchers ----------------------------------------------------------------

bool gemv_fits(const __half* w, const __half* x, int tokens, int cols) {
    return tokens >= 1 && tokens <= kGemvMaxTokens && cols > 0 && cols % 8 == 0 && aligned16(w) &&
           aligned16(x);
}

bool gemv_fused_fits(const __half* w, int tokens, int cols) {
    return tokens >= 1 && tokens <= kGemvMaxTokens && cols > 0 && cols % 8 == 0 && aligned16(w) &&
           static_cast<std::int64_t>(tokens) * cols <= kMaxStagedValues;
}

void launch_gemv(const __half* w, int rows, int cols, const __half* x, int tokens, float* y,
                 bool accumulate, cudaStream_t stream) {
    nvtx::Range range("gemv");
    if (!gemv_fits(w, x, tokens, cols) || rows <= 0) {
        throw std::invalid_argument("gemv: 1 to 8 tokens, a width that is a multiple of 8 and "
                                    "16-byte aligned operands are needed");
    }
    launch_source(w, rows, cols, HalfRows{x}, tokens, y, accumulate, stream);
}

void launch_gemv_normed(const __half* w, int rows, int cols, const GemvNormedInput& input,
                        int tokens, float* y, bool accumulate, cudaStream_t stream) {
    nvtx::Range range("gemv_normed");
    check_fused_fits(w, rows, tokens, cols, "gemv_normed");
    launch_source(w, rows, cols, NormedRows{input.x, input.weight, input.eps}, tokens, y,
                  accumulate, stream);
}

void launch_gemv_gated(const __half* w, int rows, int cols, const GemvGatedInput& input, int tokens,
                       float* y, bool accumulate, cudaStream_t stream) {
    nvtx::Range range("gemv_gated");
    check_fused_fits(w, rows, tokens, cols, "gemv_gated");
    if (input.gelu_tanh) {
        launch_source(w, rows, cols, GatedRows<true>{input.gate_up}, tokens, y, accumulate, stream);
    } else {
        launch_source(w, rows, cols, GatedRows<false>{input.gate_up}, tokens, y, accumulate,
                      stream);
    }
}

} // namespace kvscope::kernels
