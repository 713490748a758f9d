// A backend that computes nothing: it keeps no K/V, and each forward step
// advances a simulated clock by what the cost model says the step costs. The
// engine's KV manager and scheduler run for real over it, so a replayed
// trace exercises the same prefix caching, eviction and preemption a live
// run does. Every sequence "samples" token 1 (requests run to their token
// limit: a trace gives each its output length).
#pragma once

#include "engine/runner/backend.h"
#include "engine/sim/cost_model.h"

#include <cstdint>

namespace kvscope::sim {

// The simulated clock: nanoseconds from the trace's start.
struct SimClock {
    std::int64_t now_ns = 0;
};

class SimulatedBackend final : public runner::Backend {
public:
    // `bytes_per_block`: what one block would take (kv_cache_bytes() reports
    // the pool as num_blocks of them).
    SimulatedBackend(int num_blocks, int block_size, std::int64_t bytes_per_block, CostModel cost,
                     SimClock& clock);

    std::string name() const override { return "simulated"; }
    int vocab_size() const override { return kVocab; }
    int block_size() const override { return block_size_; }
    int num_blocks() const override { return num_blocks_; }
    kv::KvCacheFormat cache_format() const override { return {}; }
    std::int64_t kv_cache_bytes() const override {
        return static_cast<std::int64_t>(num_blocks_) * bytes_per_block_;
    }
    void forward(const runner::ForwardBatch& batch, float* logits) override;
    void forward_sampled(const runner::ForwardBatch& batch,
                         std::span<const runner::RowSampling> rows, std::int32_t* tokens) override;
    bool samples_on_device() const override { return true; }
    // Only how many tokens each sequence computes and attends over.
    runner::BatchDetail batch_detail() const override { return runner::BatchDetail::shape; }
    void release_blocks(std::span<const kv::BlockId>) override {}
    void copy_slots(std::span<const std::int32_t>, std::span<const std::int32_t>) override {}

    // The work of every step so far, summed.
    const StepWork& total_work() const { return total_; }
    // A step's work as the cost model counts it.
    static StepWork work_of(const runner::ForwardBatch& batch);

    // Trace token ids are drawn below this (simulated tokens carry no meaning).
    static constexpr std::int32_t kVocab = 1 << 20;

private:
    void advance(const runner::ForwardBatch& batch);

    int num_blocks_;
    int block_size_;
    std::int64_t bytes_per_block_;
    CostModel cost_;
    SimClock& clock_;
    StepWork total_;
};

} // namespace kvscope::sim
