#include "engine/cpu/matmul.h"

#include "engine/cpu/matmul_kernels.h"
#include "engine/gguf/dequantize.h"

#include <algorithm>
#include <vector>

namespace kvscope::cpu {
namespace detail {
namespace {

void scalar_dequantize_row(const WeightMatrix& w, std::int64_t row, float* out) {
    gguf::dequantize_values(w.type, w.data + static_cast<std::size_t>(row) * w.row_bytes, out,
                            w.cols);
}

void scalar_dot_tokens(const float* row, const float* x, std::int64_t stride, std::int64_t cols,
                       int n, float* out) {
    for (int k = 0; k < n; ++k) {
        const float* xk = x + k * stride;
        float sum = 0.0f;
        for (std::int64_t i = 0; i < cols; ++i) {
            sum += row[i] * xk[i];
        }
        out[k] = sum;
    }
}

} // namespace

const MatmulKernels& scalar_kernels() {
    static const MatmulKernels kernels{scalar_dequantize_row, scalar_dot_tokens};
    return kernels;
}

} // namespace detail

namespace {

const detail::MatmulKernels& kernels() {
    static const detail::MatmulKernels& chosen = []() -> const detail::MatmulKernels& {
#if defined(__x86_64__) // matmul_avx2.cpp is built only there
        if (detail::avx2_kernels() != nullptr && __builtin_cpu_supports("avx2") &&
            __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
            return *detail::avx2_kernels();
        }
#endif
        return detail::scalar_kernels();
    }();
    return chosen;
}

// Tokens per tile: a tile of activations (64 x 576 floats = 147 KiB for
// SmolLM2) stays in L2 while every weight row is streamed past it once.
constexpr std::int64_t kTokenTile = 64;

} // namespace

const char* matmul_kernel_name() {
    return &kernels() == &detail::scalar_kernels() ? "scalar" : "avx2";
}

void dequantize_row(const WeightMatrix& w, std::int64_t row, float* out) {
    kernels().dequantize_row(w, row, out);
}

void matmul(const WeightMatrix& w, const float* x, std::int64_t tokens, float* y,
            ThreadPool& pool) {
    const detail::MatmulKernels& k = kernels();
    for (std::int64_t tile = 0; tile < tokens; tile += kTokenTile) {
        const std::int64_t tile_tokens = std::min(kTokenTile, tokens - tile);
        const float* x_tile = x + tile * w.cols;
        float* y_tile = y + tile * w.rows;
        pool.parallel_for(w.rows, 16, [&](std::int64_t begin, std::int64_t end) {
            thread_local std::vector<float> row;
            row.resize(static_cast<std::size_t>(w.cols));
            float results[4];
            for (std::int64_t r = begin; r < end; ++r) {
                k.dequantize_row(w, r, row.data());
                for (std::int64_t t = 0; t < tile_tokens; t += 4) {
                    const int n = static_cast<int>(std::min<std::int64_t>(4, tile_tokens - t));
                    k.dot_tokens(row.data(), x_tile + t * w.cols, w.cols, w.cols, n, results);
                    for (int j = 0; j < n; ++j) {
                        y_tile[(t + j) * w.rows + r] = results[j];
                    }
                }
            }
        });
    }
}

} // namespace kvscope::cpu
