// Causal attention of a batch's query tokens over their sequences' paged KV
// cache, on the CPU. Grouped-query: each KV head is read once for all the
// query heads that share it.
#pragma once

#include "engine/cpu/kv_store.h"
#include "engine/cpu/thread_pool.h"
#include "engine/runner/forward_batch.h"

namespace kvscope::cpu {

// q: (tokens, heads, head_dim); out: (tokens, heads, head_dim). Token t at
// position p attends over positions 0..p of its own sequence.
void paged_attention(const LayerKvView& cache, const runner::ForwardBatch& batch, const float* q,
                     int heads, float* out, ThreadPool& pool);

} // namespace kvscope::cpu
