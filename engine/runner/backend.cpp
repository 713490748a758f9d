#include "engine/runner/backend.h"

#include "engine/sampling/sampler.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace kvscope::runner {

void Backend::forward_sampled(const ForwardBatch& batch, std::span<const RowSampling> rows,
                              std::int32_t* tokens) {
    if (rows.size() != batch.logit_tokens.size()) {
        throw std::invalid_argument("forward_sampled: one sampling row per logit row is needed");
    }
    const auto vocab = static_cast<std::size_t>(vocab_size());
    std::vector<float> logits(rows.size() * vocab);
    forward(batch, logits.data());
    for (std::size_t r = 0; r < rows.size(); ++r) {
        sampling::SamplingParams params;
        params.temperature = rows[r].temperature;
        params.top_k = rows[r].top_k;
        params.top_p = rows[r].top_p;
        params.min_p = rows[r].min_p;
        tokens[r] = sampling::pick_token(std::span<const float>(logits).subspan(r * vocab, vocab),
                                         params, rows[r].uniform);
    }
}

kv::KvGroupLayout Backend::kv_groups() const {
    return kv::KvGroupLayout::single(std::max(1, layers()));
}

void Backend::read_block(kv::BlockId, std::span<std::byte>) const {
    throw std::logic_error("the " + name() + " backend cannot move KV blocks out");
}

void Backend::write_block(kv::BlockId, std::span<const std::byte>) {
    throw std::logic_error("the " + name() + " backend cannot move KV blocks in");
}

} // namespace kvscope::runner
