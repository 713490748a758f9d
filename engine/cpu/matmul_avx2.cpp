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

// ---- Fused quantized-row kernels ----------------------------------------------
//
// Weights stay 4- or 8-bit integers, widened to int16 in registers; the
// activations come quantised to int16 per 32-value block (scale amax/32767,
// so a relative error of at most 1.5e-5 of the block's largest value). Integer
// multiply-adds (madd_epi16: 16 products per instruction) accumulate each
// block exactly in int32 before one conversion and scaling. Twice the work
// per instruction of widening to fp32, and far closer to fp32 results than
// llama.cpp's int8 activations.

// Weights come out in the order the activations are stored (see
// quantize_activations): `even` holds elements 0, 2, ..., 30 and `odd`
// elements 1, 3, ..., 31, as int16. For 4-bit blocks one 16-byte load
// broadcast to both lanes and two lane-wise shifts do the widening, keeping
// the shuffle port free.
inline void widen_nibbles(const std::byte* qs, __m256i& even, __m256i& odd) {
    const __m256i bytes =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const __m256i mask = _mm256_set1_epi16(0x0f);
    // Lane 0 takes low nibbles (elements 0..15), lane 1 high nibbles (16..31).
    even =
        _mm256_and_si256(_mm256_srlv_epi32(bytes, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), mask);
    odd = _mm256_and_si256(_mm256_srlv_epi32(bytes, _mm256_setr_epi32(8, 8, 8, 8, 12, 12, 12, 12)),
                           mask);
}

struct Q4_1Block {
    static constexpr std::size_t bytes = 20;
    static void load(const std::byte* block, __m256i& even, __m256i& odd, float& d, float& m) {
        d = load_fp16(block);
        m = load_fp16(block + 2);
        widen_nibbles(block + 4, even, odd);
    }
};

struct Q4_0Block {
    static constexpr std::size_t bytes = 18;
    static void load(const std::byte* block, __m256i& even, __m256i& odd, float& d, float& m) {
        d = load_fp16(block);
        m = -8.0f * d; // (q - 8) * d = q * d + (-8 d)
        widen_nibbles(block + 2, even, odd);
    }
};

struct Q8_0Block {
    static constexpr std::size_t bytes = 34;
    static void load(const std::byte* block, __m256i& even, __m256i& odd, float& d, float& m) {
        d = load_fp16(block);
        m = 0.0f;
        const __m256i bytes32 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
        even = _mm256_srai_epi16(_mm256_slli_epi16(bytes32, 8), 8); // sign-extend even bytes
        odd = _mm256_srai_epi16(bytes32, 8);
    }
};

// dot(row, x_k) = sum over blocks of d * s_k * sum(q * xq_k) + m * sum(x_k).
template <typename Block, int N>
void fused_row(const std::byte* row, std::int64_t blocks, const QuantizedActivations& x,
               std::int64_t first_token, float* out) {
    __m256 acc[N];
    float offset[N];
    for (int k = 0; k < N; ++k) {
        acc[k] = _mm256_setzero_ps();
        offset[k] = 0.0f;
    }
    for (std::int64_t b = 0; b < blocks; ++b) {
        __m256i even, odd;
        float d, m;
        Block::load(row + static_cast<std::size_t>(b) * Block::bytes, even, odd, d, m);
        for (int k = 0; k < N; ++k) {
            const std::int64_t token = first_token + k;
            const std::int16_t* xq = x.values + (token * blocks + b) * 32;
            const __m256i products = _mm256_add_epi32(
                _mm256_madd_epi16(even, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq))),
                _mm256_madd_epi16(odd,
                                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 16))));
            const float scale = d * x.scales[token * blocks + b];
            acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(products), _mm256_set1_ps(scale), acc[k]);
            offset[k] += m * x.block_sums[token * blocks + b];
        }
    }
    for (int k = 0; k < N; ++k) {
        out[k] = horizontal_sum(acc[k]) + offset[k];
    }
}

template <typename Block>
void fused_dispatch(const std::byte* row, std::int64_t blocks, const QuantizedActivations& x,
                    std::int64_t first_token, int n, float* out) {
    switch (n) {
    case 4:
        fused_row<Block, 4>(row, blocks, x, first_token, out);
        return;
    case 3:
        fused_row<Block, 3>(row, blocks, x, first_token, out);
        return;
    case 2:
        fused_row<Block, 2>(row, blocks, x, first_token, out);
        return;
    default:
        fused_row<Block, 1>(row, blocks, x, first_token, out);
        return;
    }
}

// x (tokens, cols) -> int16 per 32-value block with one scale each, plus the
// exact fp32 block sums for the offset term.
void avx2_quantize_activations(const float* x, std::int64_t tokens, std::int64_t cols,
                               QuantizedActivations& out) {
    const std::int64_t blocks = cols / 32;
    const __m256 sign_mask = _mm256_set1_ps(-0.0f);
    for (std::int64_t i = 0; i < tokens * blocks; ++i) {
        const float* src = x + i * 32;
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        __m256 sum = _mm256_setzero_ps();
        for (int j = 0; j < 4; ++j) {
            v[j] = _mm256_loadu_ps(src + 8 * j);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[j]));
            sum = _mm256_add_ps(sum, v[j]);
        }
        const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        const float max_abs = _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
        const float scale = max_abs / 32767.0f;
        const __m256 inverse = _mm256_set1_ps(scale > 0 ? 1.0f / scale : 0.0f);
        // Stored as the kernels read weights: the 16 even-indexed values,
        // then the 16 odd-indexed ones.
        alignas(32) std::int32_t rounded[32];
        for (int j = 0; j < 4; ++j) {
            _mm256_store_si256(reinterpret_cast<__m256i*>(rounded + 8 * j),
                               _mm256_cvtps_epi32(_mm256_mul_ps(v[j], inverse)));
        }
        std::int16_t* dst = out.values + i * 32;
        for (int j = 0; j < 16; ++j) {
            dst[j] = static_cast<std::int16_t>(rounded[2 * j]);
            dst[16 + j] = static_cast<std::int16_t>(rounded[2 * j + 1]);
        }
        out.scales[i] = scale;
        out.block_sums[i] = horizontal_sum(sum);
    }
}

// Eight tokens of one row at once: per block the eight int32 product
// vectors are reduced across lanes into one vector holding a sum per token,
// so the per-block scaling (convert, scale, accumulate) is done once for all
// eight instead of once per token. `group_scales` and `group_sums` hold, per
// block, the eight tokens' activation scales and block sums side by side.
template <typename Block>
void fused_row_8(const std::byte* row, std::int64_t blocks, const QuantizedActivations& x,
                 std::int64_t first_token, const float* group_scales, const float* group_sums,
                 float* out) {
    __m256 acc = _mm256_setzero_ps();
    __m256 offset = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < blocks; ++b) {
        __m256i even, odd;
        float d, m;
        Block::load(row + static_cast<std::size_t>(b) * Block::bytes, even, odd, d, m);
        __m256i p[8];
        for (int k = 0; k < 8; ++k) {
            const std::int16_t* xq = x.values + ((first_token + k) * blocks + b) * 32;
            p[k] = _mm256_add_epi32(
                _mm256_madd_epi16(even, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq))),
                _mm256_madd_epi16(odd,
                                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 16))));
        }
        // hadd pairs within 128-bit lanes; after two rounds lane 0 holds the
        // low-half sums of tokens 0-3 (and 4-7), lane 1 the high-half sums.
        const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]);
        const __m256i h23 = _mm256_hadd_epi32(p[2], p[3]);
        const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]);
        const __m256i h67 = _mm256_hadd_epi32(p[6], p[7]);
        const __m256i h0123 = _mm256_hadd_epi32(h01, h23);
        const __m256i h4567 = _mm256_hadd_epi32(h45, h67);
        const __m256i sums = _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                                              _mm256_permute2x128_si256(h0123, h4567, 0x31));
        const __m256 scale =
            _mm256_mul_ps(_mm256_set1_ps(d), _mm256_loadu_ps(group_scales + b * 8));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc);
        offset = _mm256_fmadd_ps(_mm256_set1_ps(m), _mm256_loadu_ps(group_sums + b * 8), offset);
    }
    _mm256_storeu_ps(out, _mm256_add_ps(acc, offset));
}

void avx2_fused_row_8_tokens(const WeightMatrix& w, std::int64_t row, const QuantizedActivations& x,
                             std::int64_t first_token, const float* group_scales,
                             const float* group_sums, float* out) {
    const std::byte* src = w.data + static_cast<std::size_t>(row) * w.row_bytes;
    const std::int64_t blocks = w.cols / 32;
    switch (w.type) {
    case gguf::TensorType::Q4_1:
        fused_row_8<Q4_1Block>(src, blocks, x, first_token, group_scales, group_sums, out);
        return;
    case gguf::TensorType::Q4_0:
        fused_row_8<Q4_0Block>(src, blocks, x, first_token, group_scales, group_sums, out);
        return;
    default:
        fused_row_8<Q8_0Block>(src, blocks, x, first_token, group_scales, group_sums, out);
        return;
    }
}

bool avx2_has_fused(gguf::TensorType type) {
    return type == gguf::TensorType::Q4_0 || type == gguf::TensorType::Q4_1 ||
           type == gguf::TensorType::Q8_0;
}

void avx2_fused_row_tokens(const WeightMatrix& w, std::int64_t row, const QuantizedActivations& x,
                           std::int64_t first_token, int n, float* out) {
    const std::byte* src = w.data + static_cast<std::size_t>(row) * w.row_bytes;
    const std::int64_t blocks = w.cols / 32;
    switch (w.type) {
    case gguf::TensorType::Q4_1:
        fused_dispatch<Q4_1Block>(src, blocks, x, first_token, n, out);
        return;
    case gguf::TensorType::Q4_0:
        fused_dispatch<Q4_0Block>(src, blocks, x, first_token, n, out);
        return;
    default:
        fused_dispatch<Q8_0Block>(src, blocks, x, first_token, n, out);
        return;
    }
}

} // namespace

const MatmulKernels* avx2_kernels() {
    static const MatmulKernels kernels{avx2_dequantize_row,       avx2_dot_tokens,
                                       avx2_quantize_activations, avx2_fused_row_tokens,
                                       avx2_fused_row_8_tokens,   avx2_has_fused};
    return &kernels;
}

} // namespace kvscope::cpu::detail
