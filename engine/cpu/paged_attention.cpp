#include "engine/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace kvscope::cpu {
namespace {

// Keys per attention work item. Long contexts are split into segments of this
// many keys, each attended separately and merged (the split-K scheme of
// flash-decoding), so a single decoding sequence still spreads over all
// threads; the split depends only on the context length, never on the batch.
constexpr std::int32_t kSegmentKeys = 256;

struct Segment {
    std::int64_t token;
    int kv_head;
    std::int32_t begin; // key positions [begin, end)
    std::int32_t end;
};

// One segment of keys for one (query token, KV head): for each query head of
// the group, the segment's max score, the sum of exp(score - max) and the
// values weighted by exp(score - max), unnormalised. Built for AVX2 and for
// the baseline (the loader picks one per CPU); the loop nest is in one
// function so the dispatch happens once per segment.
__attribute__((target_clones("avx2", "default"))) void
attend_segment(const LayerKvView& head, const kv::BlockId* table, std::int32_t begin,
               std::int32_t end, const float* q, int group, float scale, float* scores,
               float* max_out, float* sum_out, float* out) {
    const int d = head.head_dim;
    const std::int32_t n = end - begin;
    for (std::int32_t j = 0; j < n; ++j) {
        const std::int32_t position = begin + j;
        const float* key =
            head.key_at(table[position / head.block_size], 0, position % head.block_size);
        for (int g = 0; g < group; ++g) {
            const float* query = q + g * d;
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int i = 0; i < d; ++i) {
                sum += query[i] * key[i];
            }
            scores[static_cast<std::size_t>(g) * n + j] = sum * scale;
        }
    }
    for (int g = 0; g < group; ++g) {
        float* s = scores + static_cast<std::size_t>(g) * n;
        float max_score = s[0];
        for (std::int32_t j = 1; j < n; ++j) {
            max_score = std::max(max_score, s[j]);
        }
        float total = 0.0f;
        for (std::int32_t j = 0; j < n; ++j) {
            s[j] = std::exp(s[j] - max_score);
            total += s[j];
        }
        max_out[g] = max_score;
        sum_out[g] = total;
        std::memset(out + g * d, 0, static_cast<std::size_t>(d) * sizeof(float));
    }
    for (std::int32_t j = 0; j < n; ++j) {
        const std::int32_t position = begin + j;
        const float* value =
            head.value_at(table[position / head.block_size], 0, position % head.block_size);
        for (int g = 0; g < group; ++g) {
            const float weight = scores[static_cast<std::size_t>(g) * n + j];
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
    const std::int64_t tokens = batch.token_count();

    // The work list. Causal prefill gives later tokens longer contexts:
    // taking tokens from both ends in turn (0, n-1, 1, n-2, ...) gives every
    // thread's contiguous share a similar amount of work.
    std::vector<Segment> segments;
    std::vector<std::int64_t> first_segment(static_cast<std::size_t>(tokens * cache.kv_heads) + 1);
    for (std::int64_t rank = 0; rank < tokens; ++rank) {
        const std::int64_t t = rank % 2 == 0 ? rank / 2 : tokens - 1 - rank / 2;
        const std::int32_t context = batch.positions[static_cast<std::size_t>(t)] + 1;
        for (int h = 0; h < cache.kv_heads; ++h) {
            for (std::int32_t begin = 0; begin < context; begin += kSegmentKeys) {
                segments.push_back({t, h, begin, std::min(context, begin + kSegmentKeys)});
            }
        }
    }
    // Partial results per segment and query head of the group.
    std::vector<float> partial_out(segments.size() * static_cast<std::size_t>(group * d));
    std::vector<float> partial_max(segments.size() * static_cast<std::size_t>(group));
    std::vector<float> partial_sum(partial_max.size());

    pool.parallel_for(
        static_cast<std::int64_t>(segments.size()), 1, [&](std::int64_t begin, std::int64_t end) {
            thread_local std::vector<float> scores;
            for (std::int64_t i = begin; i < end; ++i) {
                const Segment& seg = segments[static_cast<std::size_t>(i)];
                const std::int32_t seq = batch.sequence_of[static_cast<std::size_t>(seg.token)];
                const kv::BlockId* table = batch.block_tables.data() +
                                           batch.block_table_offsets[static_cast<std::size_t>(seq)];
                scores.resize(static_cast<std::size_t>(group) * (seg.end - seg.begin));
                // The head's slice of the cache: a view shifted to this KV head.
                LayerKvView head = cache;
                head.keys = cache.key_at(0, seg.kv_head, 0);
                head.values = cache.value_at(0, seg.kv_head, 0);
                const std::int64_t first_query = seg.token * heads + seg.kv_head * group;
                const auto at = static_cast<std::size_t>(i) * static_cast<std::size_t>(group);
                attend_segment(head, table, seg.begin, seg.end, q + first_query * d, group, scale,
                               scores.data(), partial_max.data() + at, partial_sum.data() + at,
                               partial_out.data() + at * static_cast<std::size_t>(d));
            }
        });

    // Merge the segments of each (token, query head): rescale each to the
    // common maximum, then normalise once. Segments of one (token, KV head)
    // are adjacent in the list.
    for (std::size_t first = 0; first < segments.size();) {
        std::size_t last = first + 1;
        while (last < segments.size() && segments[last].token == segments[first].token &&
               segments[last].kv_head == segments[first].kv_head) {
            ++last;
        }
        const Segment& seg = segments[first];
        for (int g = 0; g < group; ++g) {
            float global_max = partial_max[first * static_cast<std::size_t>(group) + g];
            for (std::size_t i = first + 1; i < last; ++i) {
                global_max =
                    std::max(global_max, partial_max[i * static_cast<std::size_t>(group) + g]);
            }
            float* o = out + (seg.token * heads + seg.kv_head * group + g) * d;
            std::memset(o, 0, static_cast<std::size_t>(d) * sizeof(float));
            float total = 0.0f;
            for (std::size_t i = first; i < last; ++i) {
                const std::size_t at =
                    i * static_cast<std::size_t>(group) + static_cast<std::size_t>(g);
                const float weight = std::exp(partial_max[at] - global_max);
                total += partial_sum[at] * weight;
                const float* part = partial_out.data() + at * static_cast<std::size_t>(d);
                for (int k = 0; k < d; ++k) {
                    o[k] += weight * part[k];
                }
            }
            const float inverse = 1.0f / total;
            for (int k = 0; k < d; ++k) {
                o[k] *= inverse;
            }
        }
        first = last;
    }
}

} // namespace kvscope::cpu
