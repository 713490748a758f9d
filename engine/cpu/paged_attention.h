// Causal attention of a batch's query tokens over their sequences' paged KV
// cache, on the CPU. Grouped-query: each KV head is read once for all the
// query heads that share it.
#pragma once

#include "engine/cpu/thread_pool.h"
#include "engine/runner/forward_batch.h"

namespace kvscope::cpu {

// K/V storage of one layer: (num_blocks, kv_heads, block_size, head_dim) each,
// so one head's keys within a block are contiguous.
struct LayerKvView {
    float* keys = nullptr;
    float* values = nullptr;
    int kv_heads = 0;
    int head_dim = 0;
    int block_size = 0;

    std::int64_t block_stride() const {
        return static_cast<std::int64_t>(kv_heads) * block_size * head_dim;
    }
    float* key_at(std::int32_t block, int head, int offset) const {
        return keys + block * block_stride() +
               (static_cast<std::int64_t>(head) * block_size + offset) * head_dim;
    }
    float* value_at(std::int32_t block, int head, int offset) const {
        return values + block * block_stride() +
               (static_cast<std::int64_t>(head) * block_size + offset) * head_dim;
    }
};

// Stores k, v: (tokens, kv_heads, head_dim) into the slots batch.slot_mapping names.
void write_kv(const LayerKvView& cache, const runner::ForwardBatch& batch, const float* k,
              const float* v);

// q: (tokens, heads, head_dim); out: (tokens, heads, head_dim). Token t at
// position p attends over positions 0..p of its own sequence.
void paged_attention(const LayerKvView& cache, const runner::ForwardBatch& batch, const float* q,
                     int heads, float* out, ThreadPool& pool);

} // namespace kvscope::cpu
