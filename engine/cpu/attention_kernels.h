// The per-segment attention kernel behind paged_attention(): a portable one
// for every KV format (rows decoded into a float tile) and an AVX2 one that
// reads f32 and f16 rows straight from the cache, chosen at run time.
#pragma once

#include "engine/cpu/kv_store.h"

namespace kvscope::cpu::detail {

// One segment of keys [begin, end) of one sequence for one (query token, KV
// head). For each of the `group` query heads sharing the KV head: the
// segment's max score, the sum of exp(score - max) and the values weighted
// by exp(score - max), unnormalised, so segments merge afterwards.
struct SegmentWork {
    const LayerKvView* cache = nullptr;
    int kv_head = 0;
    const kv::BlockId* table = nullptr; // the sequence's block table
    std::int32_t begin = 0;
    std::int32_t end = 0;
    const float* q = nullptr; // (group, head_dim)
    int group = 1;
    float scale = 1.0f;
    float* scores = nullptr;  // (group, end - begin) scratch
    float* tile = nullptr;    // (block_size, head_dim) scratch
    float* max_out = nullptr; // (group)
    float* sum_out = nullptr; // (group)
    float* out = nullptr;     // (group, head_dim)
};

using SegmentKernel = void (*)(const SegmentWork& work);

void attend_segment_portable(const SegmentWork& work);

#if defined(__x86_64__)
// The AVX2/FMA/F16C kernel for K and V each in f32 or f16 and head_dim a
// multiple of 32 (attention_avx2.cpp), or nullptr for anything else.
SegmentKernel avx2_segment_kernel(kv::KvFormat key, kv::KvFormat value, int head_dim);
#endif

} // namespace kvscope::cpu::detail
