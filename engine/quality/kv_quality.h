// What a KV format and an eviction policy cost in quality: a text is scored
// teacher-forced twice, side by side, once with a full f32 cache (the
// reference) and once with the cache under test, in the same chunks, so f32
// without eviction matches the reference exactly. `kvscope eval` prints it;
// the app's teaching demos show it beside the memory saved.
#pragma once

#include "engine/kv/eviction_policy.h"
#include "engine/kv/kv_format.h"
#include "engine/model/llama_model.h"
#include "engine/session/backend_factory.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace kvscope::quality {

struct QualityOptions {
    kv::KvCacheFormat format;
    kv::EvictionConfig eviction;
    int block_size = 16;
    session::BackendSpec backend; // both caches run on it
    int prompt_tokens = 512;      // prefilled at once (SnapKV compresses these)
    int chunk = 32;               // tokens per teacher-forced step after the prompt
    // Called after each chunk with the share done; false cancels (the
    // result then covers what was scored so far).
    std::function<bool(double)> progress;
};

struct QualityResult {
    std::int64_t tokens = 0;
    std::int64_t positions = 0; // next-token predictions scored
    double kl_mean = 0;         // KL(reference || test) of next-token distributions, nats
    double kl_p99 = 0;
    double top1_agreement = 0; // share of positions with the same arg-max
    double ppl = 0;
    double ppl_reference = 0;
    double bytes_per_token = 0;           // the test cache's
    double reference_bytes_per_token = 0; // an f16 cache's, for "memory saved"
    std::int64_t evicted_tokens = 0;
    double mean_cache_tokens = 0; // entries the test cache held, averaged over chunks
    double mean_reference_tokens = 0;
};

// Throws std::runtime_error when the settings cannot run (a bad eviction
// budget, fewer than two tokens).
QualityResult measure_kv_quality(std::shared_ptr<const model::LlamaModel> model,
                                 const std::vector<std::int32_t>& tokens,
                                 const QualityOptions& options);

} // namespace kvscope::quality
