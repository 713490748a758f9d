// AVX-512 VNNI kernel for matmul()'s eight-token case: the same int16
// arithmetic as the AVX2 kernels (matmul_avx2.cpp: weights widened to int16,
// activations quantised to int16 per 32-value block, each block's products
// summed exactly in int32), twice as wide and with the multiply and the add
// in one instruction (vpdpwssd: 32 products a zmm). Prefill and batched
// decode spend their time here; one token at a time is bound by reading the
// weights, not by arithmetic, and stays with the AVX2 kernel. This file
// alone is compiled for AVX-512; matmul.cpp calls it only on CPUs that have
// it, and every other entry of the table is the AVX2 one.
#include "engine/cpu/matmul_kernels.h"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() as the unused
// merge source and then warn that it is uninitialised where they inline
// (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstring>
#include <immintrin.h>

namespace kvscope::cpu::detail {
namespace {

float fp16_at(const std::byte* p) {
    std::uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return _cvtsh_ss(bits);
}

// The activations' order within a block (matmul_kernels.h): the 16
// even-indexed values, then the 16 odd-indexed ones. Index j of the result
// takes value kEvenOdd[j] of a block in natural order.
inline __m512i even_odd(__m512i natural) {
    const __m512i order =
        _mm512_set_epi16(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1, 30, 28, 26, 24,
                         22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    return _mm512_permutexvar_epi16(order, natural);
}

// A block of 32 signed bytes (Q8_0 layout) as int16, in activation order.
struct Bytes {
    static constexpr std::size_t bytes = 32;
    static __m512i widen(const std::byte* q) {
        return even_odd(
            _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))));
    }
};

// A block of 16 bytes of nibbles (Q4_1 layout: byte i holds value i in its
// low nibble and value i + 16 in its high one) as int16, in activation order.
struct Nibbles {
    static constexpr std::size_t bytes = 16;
    static __m512i widen(const std::byte* q) {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        const __m128i mask = _mm_set1_epi8(0x0f);
        const __m128i low = _mm_and_si128(packed, mask);
        const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
        return even_odd(_mm512_cvtepu8_epi16(_mm256_set_m128i(high, low)));
    }
};

// One packed row (packed_rows.h: all blocks' fp16 scales d, then their fp16
// offsets m, then the quantised values) times eight tokens. Each token keeps
// its own fp32 accumulator: a block's exact int32 products are converted and
// scaled by d times the token's activation scale. The offset term m times
// the activations' block sum is a vector over the eight tokens, as in the
// AVX2 kernel.
template <typename Quant>
void row_8(const WeightMatrix& w, std::int64_t row, const QuantizedActivations& x,
           std::int64_t first_token, const float* group_scales, const float* group_sums,
           float* out) {
    const std::int64_t blocks = w.cols / 32;
    const std::byte* scales = w.data + static_cast<std::size_t>(row) * w.row_bytes;
    const std::byte* offsets = scales + static_cast<std::size_t>(blocks) * 2;
    const std::byte* quants = offsets + static_cast<std::size_t>(blocks) * 2;
    const std::int16_t* first = x.values + first_token * blocks * 32;
    const std::int64_t token_stride = blocks * 32;
    __m512 acc[8];
    for (__m512& a : acc) {
        a = _mm512_setzero_ps();
    }
    __m256 offset = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < blocks; ++b) {
        const __m512i weights = Quant::widen(quants + static_cast<std::size_t>(b) * Quant::bytes);
        alignas(32) float token_scale[8];
        _mm256_store_ps(token_scale, _mm256_mul_ps(_mm256_set1_ps(fp16_at(scales + 2 * b)),
                                                   _mm256_loadu_ps(group_scales + b * 8)));
        // Unrolled, so the eight accumulators stay in registers.
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
            const __m512i xk = _mm512_loadu_si512(first + k * token_stride + b * 32);
            const __m512i products = _mm512_dpwssd_epi32(_mm512_setzero_si512(), weights, xk);
            acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(products), _mm512_set1_ps(token_scale[k]),
                                     acc[k]);
        }
        offset = _mm256_fmadd_ps(_mm256_set1_ps(fp16_at(offsets + 2 * b)),
                                 _mm256_loadu_ps(group_sums + b * 8), offset);
    }
    alignas(32) float offset_of[8];
    _mm256_store_ps(offset_of, offset);
    for (int k = 0; k < 8; ++k) {
        out[k] = _mm512_reduce_add_ps(acc[k]) + offset_of[k];
    }
}

const MatmulKernels* avx2 = nullptr; // set before the table is first used

void fused_row_8_tokens(const WeightMatrix& w, std::int64_t row, const QuantizedActivations& x,
                        std::int64_t first_token, const float* group_scales,
                        const float* group_sums, float* out) {
    if (w.type == gguf::TensorType::Q8_0) {
        row_8<Bytes>(w, row, x, first_token, group_scales, group_sums, out);
    } else if (w.type == gguf::TensorType::Q8_K) {
        // The split layout's two scales a block: the AVX2 kernel.
        avx2->fused_row_8_tokens(w, row, x, first_token, group_scales, group_sums, out);
    } else {
        row_8<Nibbles>(w, row, x, first_token, group_scales, group_sums, out);
    }
}

} // namespace

const MatmulKernels* avx512_kernels() {
    static const MatmulKernels kernels = [] {
        avx2 = avx2_kernels();
        MatmulKernels k = *avx2;
        k.fused_row_8_tokens = fused_row_8_tokens;
        return k;
    }();
    return &kernels;
}

} // namespace kvscope::cpu::detail
