// AVX2 + FMA + F16C kernels for matmul(). This file alone is compiled with
// those instruction sets enabled; matmul.cpp calls it only on CPUs that have
// them.
#include "engine/cpu/matmul_kernels.h"
#include "engine/cpu/packed_rows.h"
#include "engine/gguf/dequantize.h"

#include <cstring>
#include <immintrin.h>
#include <type_traits>

namespace kvscope::cpu::detail {
namespace {

// Rows of up to 16k values take the fused kernels (their per-row scale table
// lives on the stack); wider rows are expanded and multiplied in fp32.
constexpr std::int64_t kMaxBlocksPerRow = 512;

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
    if (w.packed) {
        unpack_row(w, row, out);
        return;
    }
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

// Calls run(std::integral_constant<int, N>{}) with N = n for n of 2 to 4,
// else N = 1: the kernels take the token count as a template argument, so
// their per-token loops unroll.
template <class Run>
void with_token_count(int n, const Run& run) {
    switch (n) {
    case 4:
        run(std::integral_constant<int, 4>{});
        return;
    case 3:
        run(std::integral_constant<int, 3>{});
        return;
    case 2:
        run(std::integral_constant<int, 2>{});
        return;
    default:
        run(std::integral_constant<int, 1>{});
        return;
    }
}

void avx2_dot_tokens(const float* row, const float* x, std::int64_t stride, std::int64_t cols,
                     int n, float* out) {
    with_token_count(n,
                     [&](auto count) { dot_n<decltype(count)::value>(row, x, stride, cols, out); });
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

// 4-bit blocks: 16 bytes of nibbles (see widen_nibbles).
struct Nibbles {
    static constexpr std::size_t bytes = 16;
    static void widen(const std::byte* q, __m256i& even, __m256i& odd) {
        widen_nibbles(q, even, odd);
    }
};

// 8-bit blocks: 32 signed bytes, sign-extended to int16 in place.
struct Bytes {
    static constexpr std::size_t bytes = 32;
    static void widen(const std::byte* q, __m256i& even, __m256i& odd) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
        even = _mm256_srai_epi16(_mm256_slli_epi16(raw, 8), 8);
        odd = _mm256_srai_epi16(raw, 8);
    }
};

// A packed row (see packed_rows.h) with its blocks' scales and offsets
// converted to fp32 once, for all the tokens that use the row.
struct PackedRow {
    const std::byte* quants;
    alignas(32) float d[kMaxBlocksPerRow];
    alignas(32) float m[kMaxBlocksPerRow];

    PackedRow(const WeightMatrix& w, std::int64_t row) {
        const std::int64_t blocks = w.cols / 32;
        const std::byte* scales = w.data + static_cast<std::size_t>(row) * w.row_bytes;
        const std::byte* offsets = scales + static_cast<std::size_t>(blocks) * 2;
        quants = offsets + static_cast<std::size_t>(blocks) * 2;
        std::int64_t b = 0;
        for (; b + 8 <= blocks; b += 8) {
            _mm256_store_ps(d + b, _mm256_cvtph_ps(_mm_loadu_si128(
                                       reinterpret_cast<const __m128i*>(scales + 2 * b))));
            _mm256_store_ps(m + b, _mm256_cvtph_ps(_mm_loadu_si128(
                                       reinterpret_cast<const __m128i*>(offsets + 2 * b))));
        }
        for (; b < blocks; ++b) {
            d[b] = load_fp16(scales + 2 * b);
            m[b] = load_fp16(offsets + 2 * b);
        }
    }
};

// The eight int32 partial sums of one block and one token.
template <typename Quant>
inline __m256i block_products(const __m256i& even, const __m256i& odd, const std::int16_t* xq) {
    return _mm256_add_epi32(
        _mm256_madd_epi16(even, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq))),
        _mm256_madd_epi16(odd, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 16))));
}

// Eight vectors of eight int32 -> one vector of their eight sums, in order.
inline __m256i sum_each(const __m256i p[8]) {
    const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]);
    const __m256i h23 = _mm256_hadd_epi32(p[2], p[3]);
    const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]);
    const __m256i h67 = _mm256_hadd_epi32(p[6], p[7]);
    const __m256i h0123 = _mm256_hadd_epi32(h01, h23);
    const __m256i h4567 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                            _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

// One token: eight blocks at a time, their exact int32 sums side by side, so
// scale, offset and accumulation are vector operations over eight blocks.
template <typename Quant>
float fused_row_1(const PackedRow& row, std::int64_t blocks, const QuantizedActivations& x,
                  std::int64_t token) {
    const std::int16_t* xq = x.values + token * blocks * 32;
    const float* scales = x.scales + token * blocks;
    const float* sums = x.block_sums + token * blocks;
    __m256 acc = _mm256_setzero_ps();
    __m256 offset = _mm256_setzero_ps();
    std::int64_t b = 0;
    for (; b + 8 <= blocks; b += 8) {
        __m256i p[8];
        for (int j = 0; j < 8; ++j) {
            __m256i even, odd;
            Quant::widen(row.quants + static_cast<std::size_t>(b + j) * Quant::bytes, even, odd);
            p[j] = block_products<Quant>(even, odd, xq + (b + j) * 32);
        }
        const __m256 scale = _mm256_mul_ps(_mm256_load_ps(row.d + b), _mm256_loadu_ps(scales + b));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum_each(p)), scale, acc);
        offset = _mm256_fmadd_ps(_mm256_load_ps(row.m + b), _mm256_loadu_ps(sums + b), offset);
    }
    float tail = 0.0f;
    for (; b < blocks; ++b) {
        __m256i even, odd;
        Quant::widen(row.quants + static_cast<std::size_t>(b) * Quant::bytes, even, odd);
        const __m256 products = _mm256_cvtepi32_ps(block_products<Quant>(even, odd, xq + b * 32));
        tail += horizontal_sum(products) * (row.d[b] * scales[b]) + row.m[b] * sums[b];
    }
    return horizontal_sum(_mm256_add_ps(acc, offset)) + tail;
}

// Two to four tokens: each block is widened once and used for all of them.
template <typename Quant, int N>
void fused_row_n(const PackedRow& row, std::int64_t blocks, const QuantizedActivations& x,
                 std::int64_t first_token, float* out) {
    __m256 acc[N];
    float offset[N];
    for (int k = 0; k < N; ++k) {
        acc[k] = _mm256_setzero_ps();
        offset[k] = 0.0f;
    }
    for (std::int64_t b = 0; b < blocks; ++b) {
        __m256i even, odd;
        Quant::widen(row.quants + static_cast<std::size_t>(b) * Quant::bytes, even, odd);
        for (int k = 0; k < N; ++k) {
            const std::int64_t token = first_token + k;
            const __m256i products =
                block_products<Quant>(even, odd, x.values + (token * blocks + b) * 32);
            const float scale = row.d[b] * x.scales[token * blocks + b];
            acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(products), _mm256_set1_ps(scale), acc[k]);
            offset[k] += row.m[b] * x.block_sums[token * blocks + b];
        }
    }
    for (int k = 0; k < N; ++k) {
        out[k] = horizontal_sum(acc[k]) + offset[k];
    }
}

// Eight tokens: per block the eight tokens' int32 products are reduced across
// lanes into one vector holding a sum per token, so the block is converted and
// scaled once for all eight. `group_scales` and `group_sums` hold, per block,
// the eight tokens' activation scales and block sums side by side.
template <typename Quant>
void fused_row_8(const PackedRow& row, std::int64_t blocks, const QuantizedActivations& x,
                 std::int64_t first_token, const float* group_scales, const float* group_sums,
                 float* out) {
    __m256 acc = _mm256_setzero_ps();
    __m256 offset = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < blocks; ++b) {
        __m256i even, odd;
        Quant::widen(row.quants + static_cast<std::size_t>(b) * Quant::bytes, even, odd);
        __m256i p[8];
        for (int k = 0; k < 8; ++k) {
            p[k] =
                block_products<Quant>(even, odd, x.values + ((first_token + k) * blocks + b) * 32);
        }
        const __m256 scale =
            _mm256_mul_ps(_mm256_set1_ps(row.d[b]), _mm256_loadu_ps(group_scales + b * 8));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum_each(p)), scale, acc);
        offset =
            _mm256_fmadd_ps(_mm256_set1_ps(row.m[b]), _mm256_loadu_ps(group_sums + b * 8), offset);
    }
    _mm256_storeu_ps(out, _mm256_add_ps(acc, offset));
}

// The split layout (packed_rows.h: Q3_K, Q5_K, Q6_K): two fp32 scales a block,
// one for values 0-15 and one for 16-31. block_products' lanes 0-3 hold the
// products of values 0-15 and lanes 4-7 those of 16-31 (each lane four
// adjacent values, see widen), so a block's lanes are scaled as they are,
// by a vector of the two scales four times each, and no lane mixes groups.
struct SplitRow {
    const std::byte* scales;  // (blocks, 2) fp32
    const std::byte* offsets; // (blocks) fp32
    const std::byte* quants;  // (blocks, 32) int8

    SplitRow(const WeightMatrix& w, std::int64_t row) {
        const std::int64_t blocks = w.cols / 32;
        scales = w.data + static_cast<std::size_t>(row) * w.row_bytes;
        offsets = scales + static_cast<std::size_t>(blocks) * 8;
        quants = offsets + static_cast<std::size_t>(blocks) * 4;
    }
    __m256 scale_lanes(std::int64_t b) const {
        float pair[2];
        std::memcpy(pair, scales + 8 * b, sizeof pair);
        return _mm256_set_m128(_mm_set1_ps(pair[1]), _mm_set1_ps(pair[0]));
    }
    float offset(std::int64_t b) const {
        float value;
        std::memcpy(&value, offsets + 4 * b, sizeof value);
        return value;
    }
};

// Tokens first_token .. first_token + N - 1 of a split row.
template <int N>
void split_row_n(const SplitRow& row, std::int64_t blocks, const QuantizedActivations& x,
                 std::int64_t first_token, float* out) {
    __m256 acc[N];
    float offset[N];
    for (int k = 0; k < N; ++k) {
        acc[k] = _mm256_setzero_ps();
        offset[k] = 0.0f;
    }
    for (std::int64_t b = 0; b < blocks; ++b) {
        __m256i even, odd;
        Bytes::widen(row.quants + static_cast<std::size_t>(b) * Bytes::bytes, even, odd);
        const __m256 scales = row.scale_lanes(b);
        const float m = row.offset(b);
        for (int k = 0; k < N; ++k) {
            const std::int64_t at = (first_token + k) * blocks + b;
            const __m256i products = block_products<Bytes>(even, odd, x.values + at * 32);
            acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(products),
                                     _mm256_mul_ps(scales, _mm256_set1_ps(x.scales[at])), acc[k]);
            offset[k] += m * x.block_sums[at];
        }
    }
    for (int k = 0; k < N; ++k) {
        out[k] = horizontal_sum(acc[k]) + offset[k];
    }
}

void split_tokens(const WeightMatrix& w, std::int64_t row, const QuantizedActivations& x,
                  std::int64_t first_token, int n, float* out) {
    const SplitRow split(w, row);
    const std::int64_t blocks = w.cols / 32;
    with_token_count(n, [&](auto count) {
        split_row_n<decltype(count)::value>(split, blocks, x, first_token, out);
    });
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

bool avx2_has_fused(const WeightMatrix& w) {
    // PackedRow converts a row's scales into a table on the stack; SplitRow
    // reads them in place, so split rows of any width take the kernels.
    return w.packed && (w.type == gguf::TensorType::Q8_K ||
                        (w.cols / 32 <= kMaxBlocksPerRow &&
                         (w.type == gguf::TensorType::Q4_0 || w.type == gguf::TensorType::Q4_1 ||
                          w.type == gguf::TensorType::Q8_0)));
}

template <typename Quant>
void fused_tokens(const WeightMatrix& w, std::int64_t row, const QuantizedActivations& x,
                  std::int64_t first_token, int n, float* out) {
    const PackedRow packed(w, row);
    const std::int64_t blocks = w.cols / 32;
    with_token_count(n, [&](auto count) {
        if constexpr (decltype(count)::value == 1) {
            out[0] = fused_row_1<Quant>(packed, blocks, x, first_token);
        } else {
            fused_row_n<Quant, decltype(count)::value>(packed, blocks, x, first_token, out);
        }
    });
}

void avx2_fused_row_tokens(const WeightMatrix& w, std::int64_t row, const QuantizedActivations& x,
                           std::int64_t first_token, int n, float* out) {
    if (w.type == gguf::TensorType::Q8_K) {
        split_tokens(w, row, x, first_token, n, out);
    } else if (w.type == gguf::TensorType::Q8_0) {
        fused_tokens<Bytes>(w, row, x, first_token, n, out);
    } else {
        fused_tokens<Nibbles>(w, row, x, first_token, n, out);
    }
}

template <typename Quant>
void rows_1(const WeightMatrix& w, std::int64_t row_begin, std::int64_t row_end,
            const QuantizedActivations& x, std::int64_t token, float* y) {
    const std::int64_t blocks = w.cols / 32;
    for (std::int64_t r = row_begin; r < row_end; ++r) {
        y[r] = fused_row_1<Quant>(PackedRow(w, r), blocks, x, token);
    }
}

void avx2_fused_rows_1(const WeightMatrix& w, std::int64_t row_begin, std::int64_t row_end,
                       const QuantizedActivations& x, std::int64_t token, float* y) {
    if (w.type == gguf::TensorType::Q8_K) {
        const std::int64_t blocks = w.cols / 32;
        for (std::int64_t r = row_begin; r < row_end; ++r) {
            split_row_n<1>(SplitRow(w, r), blocks, x, token, y + r);
        }
    } else if (w.type == gguf::TensorType::Q8_0) {
        rows_1<Bytes>(w, row_begin, row_end, x, token, y);
    } else {
        rows_1<Nibbles>(w, row_begin, row_end, x, token, y);
    }
}

void avx2_fused_row_8_tokens(const WeightMatrix& w, std::int64_t row, const QuantizedActivations& x,
                             std::int64_t first_token, const float* group_scales,
                             const float* group_sums, float* out) {
    const std::int64_t blocks = w.cols / 32;
    if (w.type == gguf::TensorType::Q8_K) { // as two groups of four
        split_tokens(w, row, x, first_token, 4, out);
        split_tokens(w, row, x, first_token + 4, 4, out + 4);
    } else if (w.type == gguf::TensorType::Q8_0) {
        fused_row_8<Bytes>(PackedRow(w, row), blocks, x, first_token, group_scales, group_sums,
                           out);
    } else {
        fused_row_8<Nibbles>(PackedRow(w, row), blocks, x, first_token, group_scales, group_sums,
                             out);
    }
}

} // namespace

const MatmulKernels* avx2_kernels() {
    static const MatmulKernels kernels{avx2_dequantize_row,
                                       avx2_dot_tokens,
                                       avx2_quantize_activations,
                                       avx2_fused_row_tokens,
                                       avx2_fused_row_8_tokens,
                                       avx2_fused_rows_1,
                                       avx2_has_fused,
                                       nullptr};
    return &kernels;
}

} // namespace kvscope::cpu::detail
