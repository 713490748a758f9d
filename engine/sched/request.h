// One request's life in the engine: what was asked (RequestSpec) and what
// happened (Request): its tokens, cache blocks and honest accounting of where
// its K/V came from.
#pragma once

#include "engine/kv/block_allocator.h"
#include "engine/sampling/sampler.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvscope::sched {

struct RequestSpec {
    std::vector<std::int32_t> prompt;
    int max_tokens = 64;
    sampling::SamplingParams sampling;
    bool ignore_eos = false;     // keep generating through end tokens (benchmarks)
    double arrival_seconds = 0;  // relative to the start of a workload
    std::uint64_t cache_key = 0; // extra key of its prefix-cache hashes
};

enum class RequestState { waiting, running, finished, aborted, rejected };

std::string_view request_state_name(RequestState state);

// Where a request's K/V came from, counted once each: tokens taken from the
// prefix cache at first admission are hits; after a preemption, the tokens
// computed again are recomputed (not new work) and the ones found cached
// again are resumed (not new hits).
struct RequestAccounting {
    std::int64_t prefix_hit_tokens = 0;
    // Loaded back from the offload tier instead of computed, at any
    // admission (a resumed request's too: each load is a copy made).
    std::int64_t tier_hit_tokens = 0;
    std::int64_t blocks_hit = 0;
    std::int64_t blocks_missed = 0;
    std::int64_t shared_short_tokens = 0; // shared with a cached block but too few to reuse
    std::int64_t computed_tokens = 0;     // K/V computed for the first time
    std::int64_t recomputed_tokens = 0;   // computed again after a preemption
    std::int64_t resumed_hit_tokens = 0;  // found in the cache again after a preemption
    std::int64_t evicted_tokens = 0;      // dropped by the eviction policy
    int preemptions = 0;
    // Speculative decoding: tokens proposed, kept by verification, and the
    // steps that verified a draft.
    std::int64_t drafted_tokens = 0;
    std::int64_t accepted_tokens = 0;
    std::int64_t verify_steps = 0;
};

struct Request {
    std::int64_t id = -1;
    RequestSpec spec;
    RequestState state = RequestState::waiting;
    std::vector<std::int32_t> tokens; // prompt, then generated
    int generated = 0;
    kv::SequenceBlocks blocks;
    // Tokens of `tokens` whose K/V are in the cache (or were dropped by the
    // eviction policy): the next step computes from here. blocks.length
    // counts the cache entries, fewer than this once tokens are evicted.
    std::int32_t computed = 0;
    // The most tokens ever computed: below it, computing is recomputing.
    std::int32_t high_water = 0;
    RequestAccounting accounting;
    std::int64_t arrival_ns = 0;
    std::int64_t admitted_ns = -1;
    std::int64_t first_token_ns = -1;
    std::int64_t finish_ns = -1;
    std::string finish_reason;
    std::unique_ptr<sampling::Sampler> sampler;
    // Attention each cache entry has received (H2O), entry-aligned.
    std::vector<float> attention;
    bool prompt_compressed = false; // SnapKV ran on this admission
    // This step's draft (speculative decoding): tokens to verify after the
    // last sampled one, and the drafter's distribution for each (empty when
    // the drafter was certain or sampling is greedy).
    std::vector<std::int32_t> draft;
    std::vector<sampling::Distribution> draft_q;
    // Tokens from the start whose K/V the draft model's pool holds for this
    // request (DraftMethod::model); 0 again at each admission, since shared
    // prefix blocks were filled by the target, not necessarily the draft.
    std::int32_t draft_computed = 0;

    std::int32_t prompt_length() const { return static_cast<std::int32_t>(spec.prompt.size()); }
    std::int32_t remaining_to_compute() const {
        return static_cast<std::int32_t>(tokens.size()) - computed;
    }
    bool is_done() const {
        return state == RequestState::finished || state == RequestState::aborted ||
               state == RequestState::rejected;
    }
};

} // namespace kvscope::sched
