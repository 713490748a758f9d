// Causal attention of a batch's query tokens over their sequences' paged KV
// cache, on the CPU. Grouped-query: each KV head is read once for all the
// query heads that share it.
#pragma once

#include "engine/cpu/kv_store.h"
#include "engine/cpu/thread_pool.h"
#include "engine/runner/forward_batch.h"

namespace kvscope::cpu {

// q: (tokens, heads, head_dim); out: (tokens, heads, head_dim). Token t with
// cache position c attends over entries 0..c of its own sequence's cache, or
// the last `window` of them in a sliding-window layer.
// Where attention probabilities are summed for the sequences that capture
// them: sequence s's cache entries at data + offsets[s].
struct AttentionCapture {
    float* data = nullptr; // nullptr: capture nothing
    const std::int64_t* offsets = nullptr;
};

// A layer's attention beyond its shapes.
struct AttentionScope {
    float scale = 0.0f; // of q.k; 0: 1/sqrt(head_dim)
    int window = 0;     // entries c-window+1..c only; 0: the whole context
};

void paged_attention(const LayerKvView& cache, const runner::ForwardBatch& batch, const float* q,
                     int heads, float* out, ThreadPool& pool, const AttentionCapture& capture = {},
                     const AttentionScope& scope = {});

} // namespace kvscope::cpu
