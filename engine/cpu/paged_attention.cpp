#include "engine/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace kvscope::cpu {
namespace {

// Built for AVX2 and for the baseline; the loader picks one per CPU.
__attribute__((target_clones("avx2", "default"))) float dot(const float* a, const float* b, int n) {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; ++i) {
        sum += a[i] * b[i];
    }
    return sum;
}

__attribute__((target_clones("avx2", "default"))) void axpy(float alpha, const float* x, float* y,
                                                            int n) {
#pragma omp simd
    for (int i = 0; i < n; ++i) {
        y[i] += alpha * x[i];
    }
}

} // namespace

void write_kv(const LayerKvView& cache, const runner::ForwardBatch& batch, const float* k,
              const float* v) {
    const std::size_t head_bytes = static_cast<std::size_t>(cache.head_dim) * sizeof(float);
    for (std::int64_t t = 0; t < batch.token_count(); ++t) {
        const std::int32_t slot = batch.slot_mapping[static_cast<std::size_t>(t)];
        const std::int32_t block = slot / cache.block_size;
        const int offset = slot % cache.block_size;
        for (int h = 0; h < cache.kv_heads; ++h) {
            const std::int64_t src = (t * cache.kv_heads + h) * cache.head_dim;
            std::memcpy(cache.key_at(block, h, offset), k + src, head_bytes);
            std::memcpy(cache.value_at(block, h, offset), v + src, head_bytes);
        }
    }
}

void paged_attention(const LayerKvView& cache, const runner::ForwardBatch& batch, const float* q,
                     int heads, float* out, ThreadPool& pool) {
    const int group = heads / cache.kv_heads;
    const int d = cache.head_dim;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const std::int64_t items = batch.token_count() * cache.kv_heads;

    pool.parallel_for(items, 1, [&](std::int64_t begin, std::int64_t end) {
        thread_local std::vector<float> scores;
        for (std::int64_t item = begin; item < end; ++item) {
            const std::int64_t t = item / cache.kv_heads;
            const int kv_head = static_cast<int>(item % cache.kv_heads);
            const std::int32_t seq = batch.sequence_of[static_cast<std::size_t>(t)];
            const std::int32_t context = batch.positions[static_cast<std::size_t>(t)] + 1;
            const kv::BlockId* table = batch.block_tables.data() +
                                       batch.block_table_offsets[static_cast<std::size_t>(seq)];
            scores.resize(static_cast<std::size_t>(group) * context);

            // Scores for every query head of the group, reading each key once.
            for (std::int32_t j = 0; j < context; ++j) {
                const float* key =
                    cache.key_at(table[j / cache.block_size], kv_head, j % cache.block_size);
                for (int g = 0; g < group; ++g) {
                    const float* query = q + (t * heads + kv_head * group + g) * d;
                    scores[static_cast<std::size_t>(g) * context + j] = dot(query, key, d) * scale;
                }
            }
            for (int g = 0; g < group; ++g) {
                float* s = scores.data() + static_cast<std::size_t>(g) * context;
                const float max_score = *std::max_element(s, s + context);
                float sum = 0.0f;
                for (std::int32_t j = 0; j < context; ++j) {
                    s[j] = std::exp(s[j] - max_score);
                    sum += s[j];
                }
                const float inv = 1.0f / sum;
                for (std::int32_t j = 0; j < context; ++j) {
                    s[j] *= inv;
                }
                std::memset(out + (t * heads + kv_head * group + g) * d, 0,
                            static_cast<std::size_t>(d) * sizeof(float));
            }
            for (std::int32_t j = 0; j < context; ++j) {
                const float* value =
                    cache.value_at(table[j / cache.block_size], kv_head, j % cache.block_size);
                for (int g = 0; g < group; ++g) {
                    axpy(scores[static_cast<std::size_t>(g) * context + j], value,
                         out + (t * heads + kv_head * group + g) * d, d);
                }
            }
        }
    });
}

} // namespace kvscope::cpu
