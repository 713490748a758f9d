// Kernel sets behind matmul(): a portable one and an AVX2/FMA one chosen at
// run time, so one binary runs on any x86-64 and is fast where it can be.
#pragma once

#include "engine/cpu/matmul.h"

namespace kvscope::cpu::detail {

struct MatmulKernels {
    // Row `row` of `w` -> `out` (w.cols floats).
    void (*dequantize_row)(const WeightMatrix& w, std::int64_t row, float* out);
    // out[k] = dot(row, x + k * stride) for k < n (n <= 4), over `cols` values.
    void (*dot_tokens)(const float* row, const float* x, std::int64_t stride, std::int64_t cols,
                       int n, float* out);
};

const MatmulKernels& scalar_kernels();
#if defined(__x86_64__)
// The AVX2/FMA/F16C set (matmul_avx2.cpp); callers check the CPU first.
const MatmulKernels* avx2_kernels();
#endif

} // namespace kvscope::cpu::detail
