#include "engine/cpu/paged_attention.h"

#include "engine/cpu/attention_kernels.h"
#include "engine/cpu/kernel_set.h"
#include "engine/util/sanitizer_build.h"
#include "kernels/math/paged_slots.h"

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

// The kernel for this cache's formats on this CPU.
detail::SegmentKernel segment_kernel(const LayerKvView& cache) {
#if defined(__x86_64__)
    if (kernel_set() != KernelSet::scalar) {
        if (const detail::SegmentKernel kernel = detail::avx2_segment_kernel(
                cache.keys.format, cache.values.format, cache.head_dim)) {
            return kernel;
        }
    }
#endif
    return detail::attend_segment_portable;
}

} // namespace

void paged_attention(const LayerKvView& cache, const runner::ForwardBatch& batch, const float* q,
                     int heads, float* out, ThreadPool& pool, const AttentionCapture& capture,
                     const AttentionScope& scope) {
    const int group = heads / cache.kv_heads;
    const int d = cache.head_dim;
    const float scale = scope.scale > 0.0f ? scope.scale : 1.0f / std::sqrt(static_cast<float>(d));
    const std::int64_t tokens = batch.token_count();

    // The work list. Causal prefill gives later tokens longer contexts:
    // taking tokens from both ends in turn (0, n-1, 1, n-2, ...) gives every
    // thread's contiguous share a similar amount of work.
    std::vector<Segment> segments;
    for (std::int64_t rank = 0; rank < tokens; ++rank) {
        const std::int64_t t = rank % 2 == 0 ? rank / 2 : tokens - 1 - rank / 2;
        const std::int32_t context = batch.cache_positions[static_cast<std::size_t>(t)] + 1;
        const std::int32_t splits = math::split_count(context, scope.window, kSegmentKeys);
        for (int h = 0; h < cache.kv_heads; ++h) {
            for (std::int32_t s = 0; s < splits; ++s) {
                const math::EntryRange entries =
                    math::split_entries(context, scope.window, s, kSegmentKeys);
                segments.push_back({t, h, entries.begin, entries.end});
            }
        }
    }
    // Partial results per segment and query head of the group.
    std::vector<float> partial_out(segments.size() * static_cast<std::size_t>(group * d));
    std::vector<float> partial_max(segments.size() * static_cast<std::size_t>(group));
    std::vector<float> partial_sum(partial_max.size());

    // Whether token t's attention probabilities are captured: the kernels'
    // exp(score - max) then go to a buffer kept for the merge.
    const auto captured = [&](std::int64_t t) {
        if (capture.data == nullptr) {
            return false;
        }
        const auto i = static_cast<std::size_t>(t);
        const std::int32_t from =
            batch.capture_attention_from[static_cast<std::size_t>(batch.sequence_of[i])];
        return batch.positions[i] >= from;
    };
    std::vector<std::int64_t> kept_offsets;
    std::vector<float> kept_scores;
    if (capture.data != nullptr) {
        kept_offsets.resize(segments.size() + 1, 0);
        for (std::size_t i = 0; i < segments.size(); ++i) {
            const Segment& seg = segments[i];
            kept_offsets[i + 1] =
                kept_offsets[i] + (captured(seg.token) ? group * (seg.end - seg.begin) : 0);
        }
        kept_scores.resize(static_cast<std::size_t>(kept_offsets.back()));
    }

    const detail::SegmentKernel kernel = segment_kernel(cache);
    pool.parallel_for(
        static_cast<std::int64_t>(segments.size()), 1, [&](std::int64_t begin, std::int64_t end) {
            thread_local std::vector<float> scores;
            thread_local std::vector<float> tile;
            tile.resize(static_cast<std::size_t>(cache.block_size) * d);
            for (std::int64_t i = begin; i < end; ++i) {
                const Segment& seg = segments[static_cast<std::size_t>(i)];
                const std::int32_t seq = batch.sequence_of[static_cast<std::size_t>(seg.token)];
                const kv::BlockId* table = batch.group_table(cache.group, seq);
                scores.resize(static_cast<std::size_t>(group) * (seg.end - seg.begin));
                const bool keep =
                    !kept_offsets.empty() && kept_offsets[static_cast<std::size_t>(i) + 1] >
                                                 kept_offsets[static_cast<std::size_t>(i)];
                const std::int64_t first_query = seg.token * heads + seg.kv_head * group;
                const auto at = static_cast<std::size_t>(i) * static_cast<std::size_t>(group);
                detail::SegmentWork work;
                work.cache = &cache;
                work.kv_head = seg.kv_head;
                work.table = table;
                work.begin = seg.begin;
                work.end = seg.end;
                work.q = q + first_query * d;
                work.group = group;
                work.scale = scale;
                work.scores = keep ? kept_scores.data() + kept_offsets[static_cast<std::size_t>(i)]
                                   : scores.data();
                work.tile = tile.data();
                work.max_out = partial_max.data() + at;
                work.sum_out = partial_sum.data() + at;
                work.out = partial_out.data() + at * static_cast<std::size_t>(d);
                kernel(work);
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
            if (!kept_offsets.empty() && captured(seg.token)) {
                // Probabilities: each segment's exp(score - its max), rescaled.
                const std::int32_t seq = batch.sequence_of[static_cast<std::size_t>(seg.token)];
                float* sums = capture.data + capture.offsets[static_cast<std::size_t>(seq)];
                for (std::size_t i = first; i < last; ++i) {
                    const std::size_t at =
                        i * static_cast<std::size_t>(group) + static_cast<std::size_t>(g);
                    const float factor = std::exp(partial_max[at] - global_max) * inverse;
                    const std::int32_t n = segments[i].end - segments[i].begin;
                    const float* e = kept_scores.data() + kept_offsets[i] + g * n;
                    float* dst = sums + segments[i].begin;
                    for (std::int32_t j = 0; j < n; ++j) {
                        dst[j] += factor * e[j];
                    }
                }
            }
        }
        first = last;
    }
}

// The loader picks a clone per CPU through an IFUNC resolver it runs while
// relocating, before ThreadSanitizer's runtime starts: an instrumented
// resolver crashes there, so a ThreadSanitizer build keeps only the baseline
// clone.
#ifdef KVSCOPE_THREAD_SANITIZER
#define KVSCOPE_AVX2_AND_BASELINE_CLONES
#else
#define KVSCOPE_AVX2_AND_BASELINE_CLONES __attribute__((target_clones("avx2", "default")))
#endif

namespace detail {

// Keys and values are read a block at a time, decoded into the tile unless
// the cache holds them as f32. Built for AVX2 and for the baseline (the loader
// picks one per CPU); the loop nest is in one function so the dispatch happens
// once per segment.
KVSCOPE_AVX2_AND_BASELINE_CLONES void attend_segment_portable(const SegmentWork& work) {
    const LayerKvView& cache = *work.cache;
    const int kv_head = work.kv_head;
    const kv::BlockId* table = work.table;
    const std::int32_t begin = work.begin;
    const std::int32_t end = work.end;
    const float* q = work.q;
    const int group = work.group;
    const float scale = work.scale;
    float* scores = work.scores;
    float* tile = work.tile;
    float* max_out = work.max_out;
    float* sum_out = work.sum_out;
    float* out = work.out;
    const int d = cache.head_dim;
    const int block_size = cache.block_size;
    const std::int32_t n = end - begin;
    for (std::int32_t position = begin; position < end;) {
        const int first = position % block_size;
        const int count = std::min(block_size - first, end - position);
        const float* keys =
            cache.rows(cache.keys, math::block_of_entry(table, position, block_size), kv_head,
                       first, count, tile);
        for (int j = 0; j < count; ++j) {
            const float* key = keys + static_cast<std::int64_t>(j) * d;
            for (int g = 0; g < group; ++g) {
                const float* query = q + g * d;
                float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                for (int i = 0; i < d; ++i) {
                    sum += query[i] * key[i];
                }
                scores[static_cast<std::size_t>(g) * n + (position - begin) + j] = sum * scale;
            }
        }
        position += count;
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
    for (std::int32_t position = begin; position < end;) {
        const int first = position % block_size;
        const int count = std::min(block_size - first, end - position);
        const float* values =
            cache.rows(cache.values, math::block_of_entry(table, position, block_size), kv_head,
                       first, count, tile);
        for (int j = 0; j < count; ++j) {
            const float* value = values + static_cast<std::int64_t>(j) * d;
            for (int g = 0; g < group; ++g) {
                const float weight =
                    scores[static_cast<std::size_t>(g) * n + (position - begin) + j];
                float* o = out + g * d;
#pragma omp simd
                for (int i = 0; i < d; ++i) {
                    o[i] += weight * value[i];
                }
            }
        }
        position += count;
    }
}

} // namespace detail

} // namespace kvscope::cpu
