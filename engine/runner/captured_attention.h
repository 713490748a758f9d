// The attention probabilities a forward pass captured for H2O and SnapKV, per
// sequence of its batch: sequence s's cache entries at offsets()[s]. Every
// backend keeps one between forward() and the engine's reading of it.
#pragma once

#include "engine/runner/forward_batch.h"

#include <cstdint>
#include <span>
#include <vector>

namespace kvscope::runner {

// Where each sequence's entries start in a batch's capture sums:
// (sequences + 1) running totals of the context lengths.
inline std::vector<std::int64_t> capture_offsets(const ForwardBatch& batch) {
    std::vector<std::int64_t> offsets{0};
    offsets.reserve(batch.context_lengths.size() + 1);
    for (const std::int32_t length : batch.context_lengths) {
        offsets.push_back(offsets.back() + length);
    }
    return offsets;
}

class CapturedAttention {
public:
    // Zeroed sums for `batch`, or nothing when it captures no attention.
    void reset(const ForwardBatch& batch) {
        sums_.clear();
        offsets_.clear();
        if (batch.captures_attention()) {
            offsets_ = capture_offsets(batch);
            sums_.assign(static_cast<std::size_t>(offsets_.back()), 0.0f);
        }
    }

    float* sums() { return sums_.data(); } // null when nothing is captured
    const std::int64_t* offsets() const { return offsets_.data(); }

    // Sequence s's sums; empty when nothing was captured.
    std::span<const float> of(std::size_t s) const {
        if (sums_.empty() || s + 1 >= offsets_.size()) {
            return {};
        }
        const auto begin = static_cast<std::size_t>(offsets_[s]);
        const auto end = static_cast<std::size_t>(offsets_[s + 1]);
        return std::span<const float>(sums_).subspan(begin, end - begin);
    }

private:
    std::vector<float> sums_;
    std::vector<std::int64_t> offsets_;
};

} // namespace kvscope::runner
