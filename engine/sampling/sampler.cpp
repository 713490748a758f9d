#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_set>

namespace kvscope::sampling {

std::string SamplingParams::problem() const {
    if (!std::isfinite(temperature)) {
        return "temperature must be a finite number";
    }
    if (top_p <= 0.0f || !std::isfinite(top_p)) {
        return "top-p must be above 0 (1 turns it off)";
    }
    if (min_p < 0.0f || min_p > 1.0f) {
        return "min-p must be between 0 and 1";
    }
    if (repetition_penalty <= 0.0f || !std::isfinite(repetition_penalty)) {
        return "repetition penalty must be above 0 (1 turns it off)";
    }
    if (repetition_window < 0) {
        return "repetition window must not be negative";
    }
    return {};
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params)
    , rng_(params.seed) {}

std::int32_t Sampler::sample(std::span<const float> logits, std::span<const std::int32_t> history) {
    const auto vocab = static_cast<std::int32_t>(logits.size());
    candidates_.resize(logits.size());
    for (std::int32_t i = 0; i < vocab; ++i) {
        candidates_[static_cast<std::size_t>(i)] = {logits[static_cast<std::size_t>(i)], i};
    }

    if (params_.repetition_penalty != 1.0f && params_.repetition_window > 0) {
        const std::size_t window =
            std::min(history.size(), static_cast<std::size_t>(params_.repetition_window));
        std::unordered_set<std::int32_t> recent(history.end() - static_cast<std::ptrdiff_t>(window),
                                                history.end());
        for (const std::int32_t id : recent) {
            if (id >= 0 && id < vocab) {
                float& logit = candidates_[static_cast<std::size_t>(id)].first;
                logit = logit > 0 ? logit / params_.repetition_penalty
                                  : logit * params_.repetition_penalty;
            }
        }
    }

    const auto by_logit = [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    if (params_.temperature <= 0.0f) {
        return std::min_element(candidates_.begin(), candidates_.end(), by_logit)->second;
    }

    // Sort only as far as the filters can reach.
    std::size_t keep = candidates_.size();
    if (params_.top_k > 0) {
        keep = std::min(keep, static_cast<std::size_t>(params_.top_k));
    }
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep),
                      candidates_.end(), by_logit);
    candidates_.resize(keep);

    // Probabilities before temperature decide top-p and min-p, as in llama.cpp.
    const float max_logit = candidates_.front().first;
    std::vector<double> probs(keep);
    double sum = 0;
    for (std::size_t i = 0; i < keep; ++i) {
        probs[i] = std::exp(static_cast<double>(candidates_[i].first - max_logit));
        sum += probs[i];
    }
    if (params_.top_p < 1.0f) {
        double cumulative = 0;
        std::size_t cut = keep;
        for (std::size_t i = 0; i < keep; ++i) {
            cumulative += probs[i] / sum;
            if (cumulative >= params_.top_p) {
                cut = i + 1;
                break;
            }
        }
        keep = cut;
    }
    if (params_.min_p > 0.0f) {
        // probs[0] is the most likely token's (unnormalised) probability, 1.
        std::size_t cut = 1;
        while (cut < keep && probs[cut] >= params_.min_p) {
            ++cut;
        }
        keep = cut;
    }

    std::vector<double> weights(keep);
    for (std::size_t i = 0; i < keep; ++i) {
        weights[i] = std::exp(static_cast<double>(candidates_[i].first - max_logit) /
                              static_cast<double>(params_.temperature));
    }
    std::discrete_distribution<std::size_t> pick(weights.begin(), weights.end());
    return candidates_[pick(rng_)].second;
}

} // namespace kvscope::sampling
