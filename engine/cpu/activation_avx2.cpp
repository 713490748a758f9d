#include "engine/cpu/activation_kernels.h"

#include <immintrin.h>

namespace kvscope::cpu::detail {

namespace {

// e^x: x = n ln2 + r with |r| <= ln2 / 2, e^r by Cephes' expf polynomial,
// 2^n through the exponent bits. x is clamped so that 2^n stays a normal
// float (the caller takes the top end as infinity).
inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // ln 2 in two parts, so n * ln2 is subtracted without losing r's bits.
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i exponent =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
}

template <bool GeluTanh>
inline __m256 gated8(__m256 x, __m256 up) {
    __m256 k = x;
    if constexpr (GeluTanh) {
        // 2 sqrt(2/pi) (x + 0.044715 x^3) = x (a + b x^2)
        const __m256 a = _mm256_set1_ps(2.0f * 0.7978845608028654f);
        const __m256 b = _mm256_set1_ps(2.0f * 0.7978845608028654f * 0.044715f);
        k = _mm256_mul_ps(x, _mm256_fmadd_ps(b, _mm256_mul_ps(x, x), a));
    }
    const __m256 minus_k = _mm256_sub_ps(_mm256_setzero_ps(), k);
    // Past exp's range the sigmoid is 0 (x / inf), as the scalar math gives.
    const __m256 e = _mm256_blendv_ps(exp8(minus_k), _mm256_set1_ps(__builtin_inff()),
                                      _mm256_cmp_ps(minus_k, _mm256_set1_ps(88.3f), _CMP_GT_OQ));
    return _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), up);
}

template <bool GeluTanh>
void gated_rows(float* gate, const float* up, std::int64_t count) {
    std::int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        _mm256_storeu_ps(gate + i,
                         gated8<GeluTanh>(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    }
    if (i < count) { // the same arithmetic for the last few, through a mask
        const int left = static_cast<int>(count - i);
        const __m256i mask =
            _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256 out =
            gated8<GeluTanh>(_mm256_maskload_ps(gate + i, mask), _mm256_maskload_ps(up + i, mask));
        _mm256_maskstore_ps(gate + i, mask, out);
    }
}

} // namespace

void gated_activation_avx2(float* gate, const float* up, std::int64_t count, bool gelu_tanh) {
    if (gelu_tanh) {
        gated_rows<true>(gate, up, count);
    } else {
        gated_rows<false>(gate, up, count);
    }
}

} // namespace kvscope::cpu::detail
