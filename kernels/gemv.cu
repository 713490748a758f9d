#include "kernels/activation_overflow.h"
#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/gated_activation.cuh"
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
//
// Gated (rows = ffn, the matrix's 2 * ffn rows the gates' then the ups'):
// the warp of output j dots weight rows j and ffn + j, each summed exactly
// as the plain kernel sums it (same chunks, same order, same shuffles), so
// the outputs are the bits of the product followed by launch_gated_half.
template <int T, Epilogue E>
__global__ void __launch_bounds__(kThreads)
    gemv_kernel(const __half* __restrict__ w, int rows, int cols, const __half* x,
                float* __restrict__ y, bool accumulate, const float* __restrict__ bias,
                __half* __restrict__ gated, unsigned int* overflows) {
    constexpr int kWeightRows = E == Epilogue::store ? 1 : 2;
    const int row =
        static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    if (row >= rows) {
        return; // the whole warp; no block-wide barrier follows
    }
    const int chunks = cols / 8;
    const uint4* w_rows[kWeightRows];
#pragma unroll
    for (int r = 0; r < kWeightRows; ++r) {
        w_rows[r] =
            reinterpret_cast<const uint4*>(w + (static_cast<std::int64_t>(r) * rows + row) * cols);
    }
    uint4 held[kWeightRows][kHeldChunks];
#pragma unroll
    for (int r = 0; r < kWeightRows; ++r) {
#pragma unroll
        for (int i = 0; i < kHeldChunks; ++i) {
            const int c = lane + 32 * i;
            held[r][i] = c < chunks ? __ldg(w_rows[r] + c) : make_uint4(0, 0, 0, 0);
        }
    }
    wait_for_previous_kernel();
    // The inputs another kernel wrote, read only after the wait.
    const uint4* input = reinterpret_cast<const uint4*>(x);
    float acc[kWeightRows][T] = {};
#pragma unroll
    for (int i = 0; i < kHeldChunks; ++i) {
        const int c = lane + 32 * i;
        if (c < chunks) {
#pragma unroll
            for (int t = 0; t < T; ++t) {
                const uint4 in = input[t * chunks + c];
#pragma unroll
                for (int r = 0; r < kWeightRows; ++r) {
                    acc[r][t] += dot8(held[r][i], in);
                }
            }
        }
    }
#pragma unroll 2
    for (int c = lane + 32 * kHeldChunks; c < chunks; c += 32) {
        uint4 weights[kWeightRows];
#pragma unroll
        for (int r = 0; r < kWeightRows; ++r) {
            weights[r] = __ldg(w_rows[r] + c);
        }
#pragma unroll
        for (int t = 0; t < T; ++t) {
            const uint4 in = input[t * chunks + c];
#pragma unroll
            for (int r = 0; r < kWeightRows; ++r) {
                acc[r][t] += dot8(weights[r], in);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < T; ++t) {
        float sum[kWeightRows];
#pragma unroll
        for (int r = 0; r < kWeightRows; ++r) {
            sum[r] = acc[r][t];
            for (int offset = 16; offset > 0; offset /= 2) {
                sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], offset);
            }
        }
        if (lane == 0) {
            if constexpr (E == Epilogue::store) {
                float* out = y + static_cast<std::int64_t>(t) * rows + row;
                float value = accumulate ? *out + sum[0] : sum[0];
                if (bias != nullptr) { // as launch_add_bias would add it after
                    value += bias[row];
                }
                *out = value;
            } else {
                gated[static_cast<std::int64_t>(t) * rows + row] =
                    gated_activation(E == Epilogue::gelu_gate, sum[0], sum[1], overflows);
            }
        }
    }
}

template <Epilogue E>
struct Launch {
    const __half* w;
    int rows;
    int cols;
    const __half* x;
    float* y;
    bool accumulate;
    const float* bias;
    __half* gated;
    cudaStream_t stream;

    template <int T>
    void run() const {
        const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
        launch_kernel("gemv_kernel", gemv_kernel<T, E>, dim3(blocks), dim3(kThreads), 0, stream, w,
                      rows, cols, x, y, accumulate, bias, gated,
                      E == Epilogue::store ? nullptr : activation_overflow_counter());
    }
    // The token count a template argument: the sums stay in registers.
    void tokens(int count) const {
        switch (count) {
        case 1:
            return run<1>();
        case 2:
            return run<2>();
        case 3:
            return run<3>();
        case 4:
            return run<4>();
        case 5:
            return run<5>();
        case 6:
            return run<6>();
        case 7:
            return run<7>();
        default:
            return run<8>();
        }
    }
};

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
                 bool accumulate, cudaStream_t stream, const float* bias) {
    nvtx::Range range("gemv");
    if (!gemv_fits(w, x, tokens, cols) || rows <= 0) {
        throw std::invalid_argument("gemv: 1 to 8 tokens, a width that is a multiple of 8 and "
                                    "16-byte aligned operands are needed");
    }
    Launch<Epilogue::store>{w, rows, cols, x, y, accumulate, bias, nullptr, stream}.tokens(tokens);
}

void launch_gemv_gated(const __half* w_gate_up, int ffn, int cols, const __half* x, int tokens,
                       bool gelu_tanh, __half* out, cudaStream_t stream) {
    nvtx::Range range(gelu_tanh ? "gemv_gelu_mul" : "gemv_silu_mul");
    if (!gemv_fits(w_gate_up, x, tokens, cols) || ffn <= 0) {
        throw std::invalid_argument("gated gemv: 1 to 8 tokens, a width that is a multiple of 8 "
                                    "and 16-byte aligned operands are needed");
    }
    if (gated_output_overlaps_input(out, ffn, x, cols, tokens)) {
        throw std::invalid_argument("gated gemv: the output overlaps the input it reads");
    }
    with_gated_epilogue(gelu_tanh, [&](auto epilogue) {
        Launch<decltype(epilogue)::value>{w_gate_up, ffn,     cols, x,     nullptr,
                                          false,     nullptr, out,  stream}
            .tokens(tokens);
    });
}

} // namespace kvscope::kernels
