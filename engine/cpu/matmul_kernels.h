// Kernel sets behind matmul(): a portable one, an AVX2/FMA one and one with
// AVX-512 VNNI, chosen at run time, so one binary runs on any x86-64 and is
// fast where it can be.
#pragma once

#include "engine/cpu/matmul.h"

namespace kvscope::cpu::detail {

// Activations prepared for the fused integer kernels: per 32-value block an
// int16 copy and its scale (x ~= values * scale), and the exact fp32 sum.
// Within a block the copy holds the even-indexed values, then the odd ones:
// the order the kernels widen weights into.
struct QuantizedActivations {
    std::int16_t* values = nullptr; // (tokens, cols)
    float* scales = nullptr;        // (tokens, cols / 32)
    float* block_sums = nullptr;    // (tokens, cols / 32)
};

// The same activations for the sixteen-token kernel, transposed so one
// vector holds a value pair of sixteen tokens: per group of 16 tokens and
// 32-value block, pair p (values 2p and 2p + 1, as two int16 in one int32)
// of token t at pairs[((group * blocks + block) * 16 + p) * 16 + t]; the
// tokens' scales and block sums side by side at [(group * blocks + block)
// * 16 + t].
struct PairedActivations {
    const std::int32_t* pairs = nullptr;
    const float* scales = nullptr;
    const float* block_sums = nullptr;
};

struct MatmulKernels {
    // Row `row` of `w` -> `out` (w.cols floats).
    void (*dequantize_row)(const WeightMatrix& w, std::int64_t row, float* out);
    // out[k] = dot(row, x + k * stride) for k < n (n <= 4), over `cols` values.
    void (*dot_tokens)(const float* row, const float* x, std::int64_t stride, std::int64_t cols,
                       int n, float* out);
    // Fills `out` for x (tokens, cols); cols is a multiple of 32.
    void (*quantize_activations)(const float* x, std::int64_t tokens, std::int64_t cols,
                                 QuantizedActivations& out);
    // Row `row` of `w` times tokens first_token .. first_token + n - 1
    // (n <= 4) of `x`, without expanding the row. Only where has_fused(w).
    void (*fused_row_tokens)(const WeightMatrix& w, std::int64_t row, const QuantizedActivations& x,
                             std::int64_t first_token, int n, float* out);
    // The same for exactly eight tokens, with their per-block scales and sums
    // regrouped as (blocks, 8). nullptr when the set has none.
    void (*fused_row_8_tokens)(const WeightMatrix& w, std::int64_t row,
                               const QuantizedActivations& x, std::int64_t first_token,
                               const float* group_scales, const float* group_sums, float* out);
    // Rows [row_begin, row_end) of `w` times one token of `x`, into
    // y[row_begin .. row_end): the decode case, with the per-row dispatch
    // hoisted out of the loop (rows are short, 18 blocks for SmolLM2).
    void (*fused_rows_1)(const WeightMatrix& w, std::int64_t row_begin, std::int64_t row_end,
                         const QuantizedActivations& x, std::int64_t token, float* y);
    // Whether the fused kernels take `w` (packed rows of the Q4_1, Q8_0 and
    // split layouts).
    bool (*has_fused)(const WeightMatrix& w);
    // Rows row .. row + rows - 1 (rows 1 or 2) of `w` times the sixteen
    // tokens of group `group`, into out[i * 16 + t]. Only where
    // has_fused(w); nullptr when the set has none.
    void (*fused_rows_16_tokens)(const WeightMatrix& w, std::int64_t row, int rows,
                                 const PairedActivations& x, std::int64_t group, float* out);
};

const MatmulKernels& scalar_kernels();
#if defined(__x86_64__)
// The AVX2/FMA/F16C set (matmul_avx2.cpp); callers check the CPU first.
const MatmulKernels* avx2_kernels();
// The AVX2 set with the eight- and sixteen-token kernels in AVX-512 VNNI
// (matmul_avx512.cpp); callers check the CPU first.
const MatmulKernels* avx512_kernels();
#endif

} // namespace kvscope::cpu::detail
