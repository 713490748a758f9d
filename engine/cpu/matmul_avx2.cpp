// AVX2 + FMA + F16C kernels for matmul(). This file alone is compiled with
// those instruction sets enabled; matmul.cpp calls it only on CPUs that have
// them.
#include "engine/cpu/matmul_kernels.h"
#include "engine/gguf/dequantize.h"

#include <cstring>
#include <immintrin.h>

namespace kvscope::cpu::detail {
namespace {

float load_fp16(const std::byte* p) {
    std::uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return _cvtsh_ss(bits);
}

// 16 bytes of packed nibbles -> 32 values (low nibbles first, as ggml lays
// out a block) as four vectors of 8 floats.
void nibbles_to_floats(const std::byte* qs, __m256 out[4]) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m128i low = _mm_and_si128(packed, mask);
    const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
    out[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(low));
    out[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(low, 8)));
    out[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(high));
    out[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(high, 8)));
}

void row_q4_0(const std::byte* src, std::int64_t blocks, float* out) {
    const __m256 eight = _mm256_set1_ps(8.0f);
    for (std::int64_t b = 0; b < blocks; ++b, src += 18, out += 32) {
        const __m256 d = _mm256_set1_ps(load_fp16(src));
        __m256 q[4];
        nibbles_to_floats(src + 2, q);
        for (int i = 0; i < 4; ++i) {
            _mm256_storeu_ps(out + 8 * i, _mm256_mul_ps(_mm256_sub_ps(q[i], eight), d));
        }
    }
}

void row_q4_1(const std::byte* src, std::int64_t blocks, float* out) {
    for (std::int64_t b = 0; b < blocks; ++b, src += 20, out += 32) {
        const __m256 d = _mm256_set1_ps(load_fp16(src));
        const __m256 m = _mm256_set1_ps(load_fp16(src + 2));
        __m256 q[4];
        nibbles_to_floats(src + 4, q);
        for (int i = 0; i < 4; ++i) {
            _mm256_storeu_ps(out + 8 * i, _mm256_fmadd_ps(q[i], d, m));
        }
    }
}

void row_q8_0(const std::byte* src, std::int64_t blocks, float* out) {
    for (std::int64_t b = 0; b < blocks; ++b, src += 34, out += 32) {
        const __m256 d = _mm256_set1_ps(load_fp16(src));
        for (int i = 0; i < 4; ++i) {
            const __m128i bytes =
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 2 + 8 * i));
            const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
            _mm256_storeu_ps(out + 8 * i, _mm256_mul_ps(q, d));
        }
    }
}

void row_f16(const std::byte* src, std::int64_t cols, float* out) {
    std::int64_t i = 0;
    for (; i + 8 <= cols; i += 8) {
        const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
    }
    for (; i < cols; ++i) {
        out[i] = load_fp16(src + 2 * i);
    }
}

void avx2_dequantize_row(const WeightMatrix& w, std::int64_t row, float* out) {
    const std::byte* src = w.data + static_cast<std::size_t>(row) * w.row_bytes;
    switch (w.type) {
    case gguf::TensorType::F32:
        std::memcpy(out, src, static_cast<std::size_t>(w.cols) * sizeof(float));
        return;
    case gguf::TensorType::F16:
        row_f16(src, w.cols, out);
        return;
    case gguf::TensorType::Q4_0:
        row_q4_0(src, w.cols / 32, out);
        return;
    case gguf::TensorType::Q4_1:
        row_q4_1(src, w.cols / 32, out);
        return;
    case gguf::TensorType::Q8_0:
        row_q8_0(src, w.cols / 32, out);
        return;
    default:
        gguf::dequantize_values(w.type, src, out, w.cols);
        return;
    }
}

float horizontal_sum(__m256 v) {
    const __m128 sum4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 sum2 = _mm_add_ps(sum4, _mm_movehl_ps(sum4, sum4));
    return _mm_cvtss_f32(_mm_add_ss(sum2, _mm_movehdup_ps(sum2)));
}

// Two accumulators per token hide the FMA latency; the row vector is loaded
// once for all N tokens.
template <int N>
void dot_n(const float* row, const float* x, std::int64_t stride, std::int64_t cols, float* out) {
    __m256 acc0[N], acc1[N];
    for (int k = 0; k < N; ++k) {
        acc0[k] = _mm256_setzero_ps();
        acc1[k] = _mm256_setzero_ps();
    }
    std::int64_t i = 0;
    for (; i + 16 <= cols; i += 16) {
        const __m256 r0 = _mm256_loadu_ps(row + i);
        const __m256 r1 = _mm256_loadu_ps(row + i + 8);
        for (int k = 0; k < N; ++k) {
            acc0[k] = _mm256_fmadd_ps(r0, _mm256_loadu_ps(x + k * stride + i), acc0[k]);
            acc1[k] = _mm256_fmadd_ps(r1, _mm256_loadu_ps(x + k * stride + i + 8), acc1[k]);
        }
    }
    for (int k = 0; k < N; ++k) {
        float sum = horizontal_sum(_mm256_add_ps(acc0[k], acc1[k]));
        for (std::int64_t j = i; j < cols; ++j) {
            sum += row[j] * x[k * stride + j];
        }
        out[k] = sum;
    }
}

void avx2_dot_tokens(const float* row, const float* x, std::int64_t stride, std::int64_t cols,
                     int n, float* out) {
    switch (n) {
    case 4:
        dot_n<4>(row, x, stride, cols, out);
        return;
    case 3:
        dot_n<3>(row, x, stride, cols, out);
        return;
    case 2:
        dot_n<2>(row, x, stride, cols, out);
        return;
    default:
        dot_n<1>(row, x, stride, cols, out);
        return;
    }
}

} // namespace

const MatmulKernels* avx2_kernels() {
    static const MatmulKernels kernels{avx2_dequantize_row, avx2_dot_tokens};
    return &kernels;
}

} // namespace kvscope::cpu::detail
