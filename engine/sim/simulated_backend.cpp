#include "engine/sim/simulated_backend.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvscope::sim {

SimulatedBackend::SimulatedBackend(int num_blocks, int block_size, std::int64_t bytes_per_block,
                                   CostModel cost, SimClock& clock)
    : num_blocks_(num_blocks)
    , block_size_(block_size)
    , bytes_per_block_(bytes_per_block)
    , cost_(std::move(cost))
    , clock_(clock) {}

StepWork SimulatedBackend::work_of(const runner::ForwardBatch& batch) {
    StepWork work;
    std::vector<std::int32_t> tokens_of(static_cast<std::size_t>(batch.sequence_count()), 0);
    for (const std::int32_t s : batch.sequence_of) {
        ++tokens_of[static_cast<std::size_t>(s)];
    }
    for (std::size_t s = 0; s < tokens_of.size(); ++s) {
        if (tokens_of[s] == 1) {
            ++work.decode_sequences;
        } else {
            work.prefill_tokens += tokens_of[s];
        }
        work.kv_tokens_read += batch.context_lengths[s];
    }
    return work;
}

void SimulatedBackend::advance(const runner::ForwardBatch& batch) {
    const StepWork work = work_of(batch);
    total_.prefill_tokens += work.prefill_tokens;
    total_.decode_sequences += work.decode_sequences;
    total_.kv_tokens_read += work.kv_tokens_read;
    clock_.now_ns += static_cast<std::int64_t>(std::llround(cost_.seconds(work) * 1e9));
}

void SimulatedBackend::forward(const runner::ForwardBatch& batch, float* logits) {
    advance(batch);
    // Token 1 leads every row (not used by the engine, which takes sampled tokens).
    const std::size_t rows = batch.logit_tokens.size();
    std::fill(logits, logits + rows * static_cast<std::size_t>(kVocab), 0.0f);
    for (std::size_t row = 0; row < rows; ++row) {
        logits[row * static_cast<std::size_t>(kVocab) + 1] = 1.0f;
    }
}

void SimulatedBackend::forward_sampled(const runner::ForwardBatch& batch,
                                       std::span<const runner::RowSampling> rows,
                                       std::int32_t* tokens) {
    advance(batch);
    std::fill(tokens, tokens + rows.size(), 1);
}

} // namespace kvscope::sim
