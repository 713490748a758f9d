// AVX-512 VNNI kernels for matmul()'s eight- and sixteen-token cases: the same int16
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
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#define KVSCOPE_GCC_105593
#pragma GCC diagnostic push
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

// A block's weights as int16 in natural order: the sixteen-token kernel
// broadcasts them a pair at a time, the eight-token one reorders them as
// the activations are (even_odd).
// 32 signed bytes (the Q8_0 layout and the split layout's values).
struct Bytes {
    static constexpr std::size_t bytes = 32;
    static __m512i widen(const std::byte* q) {
        return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
    }
};

// 16 bytes of nibbles (the Q4_1 layout: byte i holds value i in its low
// nibble and value i + 16 in its high one).
struct Nibbles {
    static constexpr std::size_t bytes = 16;
    static __m512i widen(const std::byte* q) {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        const __m128i mask = _mm_set1_epi8(0x0f);
        const __m128i low = _mm_and_si128(packed, mask);
        const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
        return _mm512_cvtepu8_epi16(_mm256_set_m128i(high, low));
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
        const __m512i weights =
            even_odd(Quant::widen(quants + static_cast<std::size_t>(b) * Quant::bytes));
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

// ---- Sixteen tokens: one vector per value pair -------------------------------
//
// A block's 32 weights as 16 pairs; each pair broadcast to all 16 lanes and
// multiplied with the same pair of the 16 tokens (PairedActivations), so
// lane t sums token t's products and no lane sums need adding up across the
// vector: per block 16 vpdpwssd, then one conversion and one scaled add for
// all 16 tokens (the eight-token kernel converts and scales per token).

// The int32 sums of a block's pairs 0-7 (values 0-15) and 8-15 (values
// 16-31) for the 16 tokens, for R rows at once: each pair of token values is
// loaded once for all R rows, and each row's sums run in two chains a half
// so the multiply-adds overlap.
template <typename Quant, int R>
inline void block_pairs(const std::byte* const (&q)[R], const std::int32_t* pairs,
                        __m512i (&first_half)[R], __m512i (&second_half)[R]) {
    alignas(64) std::int32_t weight_pairs[R][16];
    __m512i chain[R][4];
    for (int r = 0; r < R; ++r) {
        _mm512_store_si512(weight_pairs[r], Quant::widen(q[r]));
        for (__m512i& c : chain[r]) {
            c = _mm512_setzero_si512();
        }
    }
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) {
        const __m512i tokens = _mm512_loadu_si512(pairs + p * 16);
        for (int r = 0; r < R; ++r) {
            __m512i& c = chain[r][p / 8 * 2 + p % 2];
            c = _mm512_dpwssd_epi32(c, _mm512_set1_epi32(weight_pairs[r][p]), tokens);
        }
    }
    for (int r = 0; r < R; ++r) {
        first_half[r] = _mm512_add_epi32(chain[r][0], chain[r][1]);
        second_half[r] = _mm512_add_epi32(chain[r][2], chain[r][3]);
    }
}

// How a row layout (packed_rows.h) scales a block: its scale and offset
// bytes a block, and the scaled add of the block's pair sums for 16 tokens.
// Packed rows: one fp16 scale d and one fp16 offset m a block.
template <typename Quant>
struct PackedLayout {
    using Values = Quant;
    static constexpr std::size_t scale_bytes = 2;
    static constexpr std::size_t offset_bytes = 2;
    static __m512 add(__m512 acc, __m512i low, __m512i high, __m512 token_scales,
                      const std::byte* scales, std::int64_t b) {
        const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(fp16_at(scales + 2 * b)), token_scales);
        return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(low, high)), scale, acc);
    }
    static float offset(const std::byte* offsets, std::int64_t b) {
        return fp16_at(offsets + 2 * b);
    }
};

// Split rows: two fp32 scales a block, for values 0-15 (pairs 0-7) and
// 16-31 (pairs 8-15), and an fp32 offset.
struct SplitLayout {
    using Values = Bytes;
    static constexpr std::size_t scale_bytes = 8;
    static constexpr std::size_t offset_bytes = 4;
    static __m512 add(__m512 acc, __m512i low, __m512i high, __m512 token_scales,
                      const std::byte* scales, std::int64_t b) {
        float pair_scales[2];
        std::memcpy(pair_scales, scales + 8 * b, sizeof pair_scales);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(low),
                              _mm512_mul_ps(_mm512_set1_ps(pair_scales[0]), token_scales), acc);
        return _mm512_fmadd_ps(_mm512_cvtepi32_ps(high),
                               _mm512_mul_ps(_mm512_set1_ps(pair_scales[1]), token_scales), acc);
    }
    static float offset(const std::byte* offsets, std::int64_t b) {
        float m;
        std::memcpy(&m, offsets + 4 * b, sizeof m);
        return m;
    }
};

// R rows from `row` on (a row: all blocks' scales, then all offsets, then
// the values) times the sixteen tokens of `group`.
template <typename Layout, int R>
void rows_16(const WeightMatrix& w, std::int64_t row, const PairedActivations& x,
             std::int64_t group, float* out) {
    using Values = typename Layout::Values;
    const std::int64_t blocks = w.cols / 32;
    const std::byte* scales[R];
    const std::byte* offsets[R];
    const std::byte* quants[R];
    __m512 acc[R];
    __m512 offset[R];
    for (int r = 0; r < R; ++r) {
        scales[r] = w.data + static_cast<std::size_t>(row + r) * w.row_bytes;
        offsets[r] = scales[r] + static_cast<std::size_t>(blocks) * Layout::scale_bytes;
        quants[r] = offsets[r] + static_cast<std::size_t>(blocks) * Layout::offset_bytes;
        acc[r] = _mm512_setzero_ps();
        offset[r] = _mm512_setzero_ps();
    }
    const std::int64_t first = group * blocks;
    for (std::int64_t b = 0; b < blocks; ++b) {
        const std::byte* q[R];
        for (int r = 0; r < R; ++r) {
            q[r] = quants[r] + static_cast<std::size_t>(b) * Values::bytes;
        }
        __m512i low[R], high[R];
        block_pairs<Values, R>(q, x.pairs + (first + b) * 256, low, high);
        const __m512 token_scales = _mm512_loadu_ps(x.scales + (first + b) * 16);
        const __m512 token_sums = _mm512_loadu_ps(x.block_sums + (first + b) * 16);
        for (int r = 0; r < R; ++r) {
            acc[r] = Layout::add(acc[r], low[r], high[r], token_scales, scales[r], b);
            offset[r] = _mm512_fmadd_ps(_mm512_set1_ps(Layout::offset(offsets[r], b)), token_sums,
                                        offset[r]);
        }
    }
    for (int r = 0; r < R; ++r) {
        _mm512_storeu_ps(out + r * 16, _mm512_add_ps(acc[r], offset[r]));
    }
}

template <int R>
void rows_16_of(const WeightMatrix& w, std::int64_t row, const PairedActivations& x,
                std::int64_t group, float* out) {
    if (w.type == gguf::TensorType::Q8_0) {
        rows_16<PackedLayout<Bytes>, R>(w, row, x, group, out);
    } else if (w.type == gguf::TensorType::Q8_K) {
        rows_16<SplitLayout, R>(w, row, x, group, out);
    } else {
        rows_16<PackedLayout<Nibbles>, R>(w, row, x, group, out);
    }
}

void fused_rows_16_tokens(const WeightMatrix& w, std::int64_t row, int rows,
                          const PairedActivations& x, std::int64_t group, float* out) {
    if (rows == 2) {
        rows_16_of<2>(w, row, x, group, out);
    } else {
        rows_16_of<1>(w, row, x, group, out);
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
        k.fused_rows_16_tokens = fused_rows_16_tokens;
        return k;
    }();
    return &kernels;
}

} // namespace kvscope::cpu::detail

#if defined(KVSCOPE_GCC_105593)
#pragma GCC diagnostic pop
#endif
