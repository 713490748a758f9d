#include "kernels/activation_overflow.h"
#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/gated_activation.cuh"
#include "kernels/math/mma_fragments.h"
#include "kernels/nvtx_range.h"
#include "kernels/tensor_core_mma.cuh"
#include "kernels/tensor_cores.h"
#include "kernels/tile_gemm.cuh"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvscope::kernels {

// ---- Kernel -------------------------------------------------------------------

namespace {

constexpr int kWarps = 8;      // a block's warps, each every 8th slice of the inputs
constexpr int kRows = 8;       // output rows a block computes: mma's N
constexpr int kSlice = 32;     // input columns a warp takes at once: two K steps
constexpr int kMaxTiles = 4;   // 16-token tiles: kTileGemmMaxTokens / 16
constexpr int kHeldSlices = 4; // slices of weights a warp loads before the wait

__device__ inline std::uint32_t word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// One slice of a warp's share: the tiles' inputs for the slice, two K steps
// each against the lane's weights (mma::slice_column's order).
template <int T>
__device__ inline void slice_product(const __half* x, int tokens, int cols, int column,
                                     const uint4& weights, int lane, float (&acc)[T][4]) {
#pragma unroll
    for (int m = 0; m < T; ++m) {
        // A's rows lane / 4 and lane / 4 + 8 of the tile (mma::a_element).
        uint4 inputs[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int token = 16 * m + math::mma::a_element(lane, r, 0).row;
            inputs[r] = token < tokens ? *reinterpret_cast<const uint4*>(
                                             x + static_cast<std::int64_t>(token) * cols + column)
                                       : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int step = 0; step < 2; ++step) {
            std::uint32_t a[4];
#pragma unroll
            for (int reg = 0; reg < 4; ++reg) { // row reg % 2, upper half reg / 2
                a[reg] = word(inputs[reg % 2], math::mma::slice_word(step, reg / 2));
            }
            TensorCore<__half>::mma(acc[m], a, word(weights, math::mma::slice_word(step, 0)),
                                    word(weights, math::mma::slice_word(step, 1)));
        }
    }
}

// Grid (ceil(rows / 8)), kWarps warps; T 16-token tiles. Lane (group g,
// place t) loads weight row n0 + g and input rows 16 m + g and 16 m + g + 8
// of tile m, 8 values each from column 8 t of the slice
// (mma::slice_column), and the warps' sums meet in shared memory. A warp's
// first kHeldSlices slices of weights are loaded before the wait for the
// kernel before (every slice of SmolLM2's layers but the down projection's
// last two), so at these sizes the loads overlap that kernel's end.
//
// Gated (Epilogue::silu_gate, gelu_gate; rows = ffn, the matrix's 2 * ffn
// rows the gates' then the ups'): a block's 8 columns are 4 gates (n0 to
// n0 + 3) and their 4 ups (ffn + n0 on), grid ceil(ffn / 4); each sum is
// the plain kernel's (the same slices and warps in the same order), and
// the block stores gated_activation(gate, up) as fp16 into `gated`
// (tokens, ffn).
template <int T, Epilogue E>
__global__ void __launch_bounds__(kWarps * 32)
    tile_gemm_kernel(const __half* __restrict__ w, int rows, int cols, const __half* x, int tokens,
                     float* __restrict__ y, bool accumulate, const float* __restrict__ bias,
                     __half* __restrict__ gated, unsigned int* overflows) {
    constexpr bool kGated = E != Epilogue::store;
    constexpr int kOutputs = kGated ? kRows / 2 : kRows; // a block's output rows
    __shared__ alignas(16) float shares[kWarps][T][32][4];
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int n0 = static_cast<int>(blockIdx.x) * kOutputs;
    // This lane's weight row: B's column lane / 4 (mma::b_element); gated,
    // columns 0 to 3 are gates, 4 to 7 their ups.
    const int column = math::mma::b_element(lane, 0, 0).col;
    const int output = n0 + column % kOutputs;
    const int w_row = kGated && column >= kOutputs ? rows + output : output;
    const int first = 8 * (lane % 4); // its 8 values of each slice
    const int slices = cols / kSlice;
    const __half* w_at = w + static_cast<std::int64_t>(w_row) * cols + first;
    const auto weights_of = [&](int slice) {
        return slice < slices && output < rows
                   ? __ldg(reinterpret_cast<const uint4*>(w_at + slice * kSlice))
                   : make_uint4(0, 0, 0, 0);
    };
    // No kernel of the step writes the weights (dependent_launch.cuh).
    uint4 held[kHeldSlices];
#pragma unroll
    for (int i = 0; i < kHeldSlices; ++i) {
        held[i] = weights_of(warp + kWarps * i);
    }
    wait_for_previous_kernel();

    float acc[T][4] = {};
#pragma unroll
    for (int i = 0; i < kHeldSlices; ++i) {
        const int slice = warp + kWarps * i;
        if (slice < slices) {
            slice_product<T>(x, tokens, cols, slice * kSlice + first, held[i], lane, acc);
        }
    }
    for (int slice = warp + kWarps * kHeldSlices; slice < slices; slice += kWarps) {
        slice_product<T>(x, tokens, cols, slice * kSlice + first, weights_of(slice), lane, acc);
    }

#pragma unroll
    for (int m = 0; m < T; ++m) {
        *reinterpret_cast<float4*>(&shares[warp][m][lane][0]) =
            make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
    }
    __syncthreads();
    // Each thread sums one (tile, lane, value) over the warps and stores it,
    // or, gated, keeps it by (token, column) for the activation after.
    if constexpr (kGated) {
        __shared__ float sums[T * 16][kRows];
        for (int i = static_cast<int>(threadIdx.x); i < T * 32 * 4; i += kWarps * 32) {
            const int m = i / 128;
            const int l = (i / 4) % 32;
            const int v = i % 4;
            const math::mma::Element at = math::mma::c_element(l, v);
            float sum = 0.0f;
#pragma unroll
            for (int k = 0; k < kWarps; ++k) {
                sum += shares[k][m][l][v];
            }
            sums[16 * m + at.row][at.col] = sum;
        }
        __syncthreads();
        for (int i = static_cast<int>(threadIdx.x); i < T * 16 * kOutputs; i += kWarps * 32) {
            const int token = i / kOutputs;
            const int j = i % kOutputs;
            if (token < tokens && n0 + j < rows) {
                gated[static_cast<std::int64_t>(token) * rows + n0 + j] = gated_activation(
                    E == Epilogue::gelu_gate, sums[token][j], sums[token][kOutputs + j], overflows);
            }
        }
    } else {
        for (int i = static_cast<int>(threadIdx.x); i < T * 32 * 4; i += kWarps * 32) {
            const int m = i / 128;
            const int l = (i / 4) % 32;
            const int v = i % 4;
            const math::mma::Element at = math::mma::c_element(l, v);
            const int token = 16 * m + at.row;
            const int row = n0 + at.col;
            if (token >= tokens || row >= rows) {
                continue;
            }
            float sum = 0.0f;
#pragma unroll
            for (int k = 0; k < kWarps; ++k) {
                sum += shares[k][m][l][v];
            }
            float* out = y + static_cast<std::int64_t>(token) * rows + row;
            float value = accumulate ? *out + sum : sum;
            if (bias != nullptr) { // as launch_add_bias would add it after
                value += bias[row];
            }
            *out = value;
        }
    }
}

template <Epilogue E>
struct Launch {
    const __half* w;
    int rows; // output rows: the matrix's, or gated, the gates'
    int cols;
    const __half* x;
    int tokens;
    float* y;
    bool accumulate;
    const float* bias;
    __half* gated;
    cudaStream_t stream;

    template <int T>
    void run() const {
        constexpr int kOutputs = E == Epilogue::store ? kRows : kRows / 2;
        const unsigned blocks = static_cast<unsigned>((rows + kOutputs - 1) / kOutputs);
        launch_kernel("tile_gemm_kernel", tile_gemm_kernel<T, E>, dim3(blocks), dim3(kWarps * 32),
                      0, stream, w, rows, cols, x, tokens, y, accumulate, bias, gated,
                      E == Epilogue::store ? nullptr : activation_overflow_counter());
    }
    // Tiles of 16 tokens, a template argument: the sums stay in registers.
    void tiles() const {
        switch ((tokens + 15) / 16) {
        case 1:
            return run<1>();
        case 2:
            return run<2>();
        case 3:
            return run<3>();
        default:
            static_assert(kMaxTiles * 16 == kTileGemmMaxTokens, "every token count has a kernel");
            return run<kMaxTiles>();
        }
    }
};

bool aligned16(const void* pointer) {
    return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

bool tile_gemm_fits(const __half* w, const __half* x, int tokens, int rows, int cols) {
    return tokens >= kTileGemmMinTokens && tokens <= kTileGemmMaxTokens && rows > 0 && cols > 0 &&
           static_cast<long long>(rows) * cols <= kTileGemmMaxValues && cols % kSlice == 0 &&
           aligned16(w) && aligned16(x) && device_has_mma();
}

namespace {

std::string requirements() {
    return "1 to " + std::to_string(kTileGemmMaxTokens) + " tokens, at most " +
           std::to_string(kTileGemmMaxValues) +
           " weights, a width that is a multiple of 32, 16-byte aligned operands and a device of "
           "compute capability 8.0 or later are needed";
}

} // namespace

void launch_tile_gemm(const __half* w, int rows, int cols, const __half* x, int tokens, float* y,
                      bool accumulate, cudaStream_t stream, const float* bias) {
    nvtx::Range range("tile_gemm");
    if (!tile_gemm_fits(w, x, tokens, rows, cols)) {
        throw std::invalid_argument("tile gemm: " + requirements());
    }
    Launch<Epilogue::store>{w, rows, cols, x, tokens, y, accumulate, bias, nullptr, stream}.tiles();
}

void launch_tile_gemm_gated(const __half* w_gate_up, int ffn, int cols, const __half* x, int tokens,
                            bool gelu_tanh, __half* out, cudaStream_t stream) {
    nvtx::Range range(gelu_tanh ? "tile_gemm_gelu_mul" : "tile_gemm_silu_mul");
    if (ffn <= 0 || !tile_gemm_fits(w_gate_up, x, tokens, 2 * ffn, cols)) {
        throw std::invalid_argument("gated tile gemm: " + requirements());
    }
    if (gated_output_overlaps_input(out, ffn, x, cols, tokens)) {
        throw std::invalid_argument("gated tile gemm: the output overlaps the input it reads");
    }
    with_gated_epilogue(gelu_tanh, [&](auto epilogue) {
        Launch<decltype(epilogue)::value>{w_gate_up, ffn,   cols,    x,   tokens,
                                          nullptr,   false, nullptr, out, stream}
            .tiles();
    });
}

} // namespace kvscope::kernels
