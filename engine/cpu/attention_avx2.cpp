// AVX2 + FMA + F16C attention over f32 and f16 K/V rows. This file alone is
// compiled with those instruction sets; paged_attention.cpp calls it only on
// CPUs that have them. Reading f16 straight from the cache halves the bytes
// a long-context decode streams, which is what bounds its speed.
#include "engine/cpu/attention_kernels.h"

#include <algorithm>
#include <cstring>
#include <immintrin.h>

namespace kvscope::cpu::detail {
namespace {

template <bool Half>
__m256 load8(const std::byte* row, int i) {
    if constexpr (Half) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row) + i / 8));
    } else {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
    }
}

float horizontal_sum(__m256 v) {
    const __m128 pair = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 two = _mm_add_ps(pair, _mm_movehl_ps(pair, pair));
    return _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps(two, two, 1)));
}

// exp(x) for x <= 0 (scores minus their maximum), to about 2 ulp: x = n ln2 + r
// with |r| <= ln2 / 2, a degree-6 polynomial for exp(r), and 2^n built in the
// exponent bits. Inputs below -87 flush to 0, as their weights are below
// float's resolution next to the maximum's exp(0) = 1.
__m256 exp_nonpositive(__m256 x) {
    const __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // ln 2 split in two so n * ln2 is exact enough (Cody-Waite).
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i exponent =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 result = _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
    return _mm256_andnot_ps(too_small, result);
}

// Rows of a block the segment covers: [first, first + count) in `block`.
template <typename Visit>
void for_each_block_run(const SegmentWork& w, Visit&& visit) {
    const int block_size = w.cache->block_size;
    for (std::int32_t position = w.begin; position < w.end;) {
        const int first = position % block_size;
        const int count = std::min(block_size - first, w.end - position);
        visit(math::block_of_entry(w.table, position, block_size), first, count,
              position - w.begin);
        position += count;
    }
}

// Query heads whose scores and value sums share each widened K or V row:
// four heads of two 8-wide accumulators each, with the rows, fit AVX2's
// sixteen registers.
constexpr int kHeadsAtOnce = 4;

// Scores of `count` consecutive key rows for G query heads (queries (G, d)),
// into scores[h * stride + j].
template <bool Half, int G>
void score_rows(const std::byte* rows, std::int64_t row_bytes, int count, const float* queries,
                int d, float* scores, std::int32_t stride) {
    for (int j = 0; j < count; ++j) {
        const std::byte* key = rows + j * row_bytes;
        __m256 acc[G][2];
#pragma GCC unroll 4
        for (int h = 0; h < G; ++h) {
            acc[h][0] = _mm256_setzero_ps();
            acc[h][1] = _mm256_setzero_ps();
        }
        for (int i = 0; i < d; i += 16) {
            const __m256 k0 = load8<Half>(key, i);
            const __m256 k1 = load8<Half>(key, i + 8);
#pragma GCC unroll 4
            for (int h = 0; h < G; ++h) {
                const float* query = queries + h * d + i;
                acc[h][0] = _mm256_fmadd_ps(_mm256_loadu_ps(query), k0, acc[h][0]);
                acc[h][1] = _mm256_fmadd_ps(_mm256_loadu_ps(query + 8), k1, acc[h][1]);
            }
        }
#pragma GCC unroll 4
        for (int h = 0; h < G; ++h) {
            scores[static_cast<std::size_t>(h) * stride + j] =
                horizontal_sum(_mm256_add_ps(acc[h][0], acc[h][1]));
        }
    }
}

// The segment's weighted values of query heads [g, g + G) (their softmax
// numerators in w.scores), into w.out. Each head keeps 8 * kLanes[G]
// dimensions in registers: 16 for several heads, 32 for one, so a lone head
// still has four independent sums in flight.
template <bool Half, int G>
void weigh_values(const SegmentWork& w, int g, std::int32_t n) {
    constexpr int kVectors = G == 1 ? 4 : 2;
    const LayerKvView& cache = *w.cache;
    const int d = cache.head_dim;
    const int block_size = cache.block_size;
    const float* weights[G]; // each head's numerators, indexed from the segment's first key
#pragma GCC unroll 4
    for (int h = 0; h < G; ++h) {
        weights[h] = w.scores + static_cast<std::size_t>(g + h) * n;
    }
    for (int c = 0; c < d; c += 8 * kVectors) {
        __m256 acc[G][kVectors];
#pragma GCC unroll 4
        for (int h = 0; h < G; ++h) {
#pragma GCC unroll 4
            for (int k = 0; k < kVectors; ++k) {
                acc[h][k] = _mm256_setzero_ps();
            }
        }
        for (std::int32_t position = w.begin; position < w.end;) {
            const int first = position % block_size;
            const std::int32_t stop = position + std::min(block_size - first, w.end - position);
            const std::byte* value =
                cache.values.head_block(math::block_of_entry(w.table, position, block_size),
                                        w.kv_head) +
                first * cache.values.row_bytes;
            for (; position < stop; ++position, value += cache.values.row_bytes) {
                __m256 v[kVectors];
#pragma GCC unroll 4
                for (int k = 0; k < kVectors; ++k) {
                    v[k] = load8<Half>(value, c + 8 * k);
                }
#pragma GCC unroll 4
                for (int h = 0; h < G; ++h) {
                    const __m256 weight = _mm256_broadcast_ss(weights[h] + (position - w.begin));
#pragma GCC unroll 4
                    for (int k = 0; k < kVectors; ++k) {
                        acc[h][k] = _mm256_fmadd_ps(weight, v[k], acc[h][k]);
                    }
                }
            }
        }
#pragma GCC unroll 4
        for (int h = 0; h < G; ++h) {
#pragma GCC unroll 4
            for (int k = 0; k < kVectors; ++k) {
                _mm256_storeu_ps(w.out + (g + h) * d + c + 8 * k, acc[h][k]);
            }
        }
    }
}

template <bool KeyHalf, bool ValueHalf>
void attend_segment_avx2(const SegmentWork& w) {
    const LayerKvView& cache = *w.cache;
    const int d = cache.head_dim;
    const std::int32_t n = w.end - w.begin;
    const __m256 scale = _mm256_set1_ps(w.scale);

    // Scores: each key row is read and widened once for up to four query
    // heads of the group at a time.
    for_each_block_run(w, [&](kv::BlockId block, int first, int count, std::int32_t at) {
        const std::byte* rows =
            cache.keys.head_block(block, w.kv_head) + first * cache.keys.row_bytes;
        for (int g = 0; g < w.group; g += kHeadsAtOnce) {
            const int heads = std::min(kHeadsAtOnce, w.group - g);
            float* scores = w.scores + static_cast<std::size_t>(g) * n + at;
            const float* queries = w.q + g * d;
            switch (heads) {
            case 4:
                score_rows<KeyHalf, 4>(rows, cache.keys.row_bytes, count, queries, d, scores, n);
                break;
            case 3:
                score_rows<KeyHalf, 3>(rows, cache.keys.row_bytes, count, queries, d, scores, n);
                break;
            case 2:
                score_rows<KeyHalf, 2>(rows, cache.keys.row_bytes, count, queries, d, scores, n);
                break;
            default:
                score_rows<KeyHalf, 1>(rows, cache.keys.row_bytes, count, queries, d, scores, n);
            }
        }
    });

    // Softmax numerators, vectorised over keys.
    for (int g = 0; g < w.group; ++g) {
        float* s = w.scores + static_cast<std::size_t>(g) * n;
        float max_score = s[0];
        for (std::int32_t j = 1; j < n; ++j) {
            max_score = std::max(max_score, s[j]);
        }
        max_score *= w.scale;
        const __m256 max_vector = _mm256_set1_ps(max_score);
        __m256 total = _mm256_setzero_ps();
        std::int32_t j = 0;
        for (; j + 8 <= n; j += 8) {
            const __m256 e =
                exp_nonpositive(_mm256_fmsub_ps(_mm256_loadu_ps(s + j), scale, max_vector));
            _mm256_storeu_ps(s + j, e);
            total = _mm256_add_ps(total, e);
        }
        float tail_total = 0.0f;
        if (j < n) { // the last few keys through a masked copy
            alignas(32) float buffer[8];
            std::fill(buffer, buffer + 8, -1e30f);
            std::memcpy(buffer, s + j, static_cast<std::size_t>(n - j) * sizeof(float));
            const __m256 e =
                exp_nonpositive(_mm256_fmsub_ps(_mm256_load_ps(buffer), scale, max_vector));
            _mm256_store_ps(buffer, e);
            for (std::int32_t k = 0; k < n - j; ++k) {
                s[j + k] = buffer[k];
                tail_total += buffer[k];
            }
        }
        w.max_out[g] = max_score;
        w.sum_out[g] = horizontal_sum(total) + tail_total;
    }

    // Weighted values: each value row is widened once for up to four query
    // heads at a time, 16 dimensions of each in registers across the whole
    // segment.
    for (int g = 0; g < w.group; g += kHeadsAtOnce) {
        const int heads = std::min(kHeadsAtOnce, w.group - g);
        switch (heads) {
        case 4:
            weigh_values<ValueHalf, 4>(w, g, n);
            break;
        case 3:
            weigh_values<ValueHalf, 3>(w, g, n);
            break;
        case 2:
            weigh_values<ValueHalf, 2>(w, g, n);
            break;
        default:
            weigh_values<ValueHalf, 1>(w, g, n);
        }
    }
}

} // namespace

SegmentKernel avx2_segment_kernel(kv::KvFormat key, kv::KvFormat value, int head_dim) {
    using kv::KvFormat;
    const auto plain = [](KvFormat f) {
        return f == KvFormat::f32 || f == KvFormat::f16;
    };
    if (!plain(key) || !plain(value) || head_dim % 32 != 0) {
        return nullptr;
    }
    const bool key_half = key == KvFormat::f16;
    const bool value_half = value == KvFormat::f16;
    if (key_half) {
        return value_half ? attend_segment_avx2<true, true> : attend_segment_avx2<true, false>;
    }
    return value_half ? attend_segment_avx2<false, true> : attend_segment_avx2<false, false>;
}

} // namespace kvscope::cpu::detail
