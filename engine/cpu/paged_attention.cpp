#include "engine/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace kvscope::cpu {
namespace {

// One (query token, KV head) pair: scores of the group's query heads against
// every cached key of the sequence, softmax, weighted sum of the values.
// Built for AVX2 and for the baseline (the loader picks one per CPU); the
// whole loop nest is in one function so the dispatch happens once per pair.
__attribute__((target_clones("avx2", "default"))) void attend(
    const LayerKvView& cache, const kv::BlockId* table, std::int32_t context, const float* q,
    int group, float scale, float* scores, float* out) {
    const int d = cache.head_dim;
    for (std::int32_t j = 0; j < context; ++j) {
        const float* key = cache.key_at(table[j / cache.block_size], 0, j % cache.block_size);
        for (int g = 0; g < group; ++g) {
            const float* query = q + g * d;
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int i = 0; i < d; ++i) {
                sum += query[i] * key[i];
            }
            scores[static_cast<std::size_t>(g) * context + j] = sum * scale;
        }
    }
    for (int g = 0; g < group; ++g) {
        float* s = scores + static_cast<std::size_t>(g) * context;
        float max_score = s[0];
        for (std::int32_t j = 1; j < context; ++j) {
            max_score = std::max(max_score, s[j]);
        }
        float total = 0.0f;
        for (std::int32_t j = 0; j < context; ++j) {
            s[j] = std::exp(s[j] - max_score);
            total += s[j];
        }
        const float inv = 1.0f / total;
        for (std::int32_t j = 0; j < context; ++j) {
            s[j] *= inv;
        }
        std::memset(out + g * d, 0, static_cast<std::size_t>(d) * sizeof(float));
    }
    for (std::int32_t j = 0; j < context; ++j) {
        const float* value = cache.value_at(table[j / cache.block_size], 0, j % cache.block_size);
        for (int g = 0; g < group; ++g) {
            const float weight = scores[static_cast<std::size_t>(g) * context + j];
            float* o = out + g * d;
#pragma omp simd
            for (int i = 0; i < d; ++i) {
                o[i] += weight * value[i];
            }
        }
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
            // Causal prefill gives later tokens longer contexts: walking the
            // tokens from both ends in turn (0, n-1, 1, n-2, ...) hands every
            // thread's contiguous share a similar amount of work.
            const std::int64_t rank = item / cache.kv_heads;
            const std::int64_t t = rank % 2 == 0 ? rank / 2 : batch.token_count() - 1 - rank / 2;
            const int kv_head = static_cast<int>(item % cache.kv_heads);
            const std::int32_t seq = batch.sequence_of[static_cast<std::size_t>(t)];
            const std::int32_t context = batch.positions[static_cast<std::size_t>(t)] + 1;
            const kv::BlockId* table =
                batch.block_tables.data() + batch.block_table_offsets[static_cast<std::size_t>(seq)];
            scores.resize(static_cast<std::size_t>(group) * context);
            // The head's slice of the cache: key_at/value_at with head 0 of
            // a view shifted to this head.
            LayerKvView head = cache;
            head.keys = cache.key_at(0, kv_head, 0);
            head.values = cache.value_at(0, kv_head, 0);
            const std::int64_t first_query = t * heads + kv_head * group;
            attend(head, table, context, q + first_query * d, group, scale, scores.data(),
                   out + first_query * d);
        }
    });
}

} // namespace kvscope::cpu
