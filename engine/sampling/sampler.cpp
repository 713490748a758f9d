#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
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

namespace {

bool by_logit(const std::pair<float, std::int32_t>& a, const std::pair<float, std::int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// Sorts the candidates the filters can keep to the front and returns how
// many they keep: top-k, then top-p and min-p on the probabilities before
// the temperature, as in llama.cpp. Not for greedy (no filters apply).
std::size_t apply_filters(std::vector<std::pair<float, std::int32_t>>& candidates,
                          const SamplingParams& params) {
    // Sort only as far as the filters can reach.
    std::size_t keep = candidates.size();
    if (params.top_k > 0) {
        keep = std::min(keep, static_cast<std::size_t>(params.top_k));
    }
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep),
                      candidates.end(), by_logit);
    candidates.resize(keep);
    const float max_logit = candidates.front().first;
    std::vector<double> probs(keep);
    double sum = 0;
    for (std::size_t i = 0; i < keep; ++i) {
        probs[i] = std::exp(static_cast<double>(candidates[i].first - max_logit));
        sum += probs[i];
    }
    if (params.top_p < 1.0f) {
        double cumulative = 0;
        std::size_t cut = keep;
        for (std::size_t i = 0; i < keep; ++i) {
            cumulative += probs[i] / sum;
            if (cumulative >= params.top_p) {
                cut = i + 1;
                break;
            }
        }
        keep = cut;
    }
    if (params.min_p > 0.0f) {
        // probs[0] is the most likely token's (unnormalised) probability, 1.
        std::size_t cut = 1;
        while (cut < keep && probs[cut] >= params.min_p) {
            ++cut;
        }
        keep = cut;
    }
    return keep;
}

// The tempered weight of each kept candidate (unnormalised).
std::vector<double> tempered_weights(const std::vector<std::pair<float, std::int32_t>>& candidates,
                                     std::size_t keep, float temperature) {
    const float max_logit = candidates.front().first;
    std::vector<double> weights(keep);
    for (std::size_t i = 0; i < keep; ++i) {
        weights[i] = std::exp(static_cast<double>(candidates[i].first - max_logit) /
                              static_cast<double>(temperature));
    }
    return weights;
}

// The filters and the draw over `candidates` (logits after any penalty,
// with their ids); see pick_token.
std::int32_t pick_from(std::vector<std::pair<float, std::int32_t>>& candidates,
                       const SamplingParams& params, double u) {
    if (params.temperature <= 0.0f) {
        return std::min_element(candidates.begin(), candidates.end(), by_logit)->second;
    }
    const std::size_t keep = apply_filters(candidates, params);
    // The draw: the first candidate whose cumulative weight reaches u of the
    // total (the inverse of the distribution function).
    const std::vector<double> weights = tempered_weights(candidates, keep, params.temperature);
    double total = 0;
    for (const double w : weights) {
        total += w;
    }
    const double target = u * total;
    double cumulative = 0;
    for (std::size_t i = 0; i < keep; ++i) {
        cumulative += weights[i];
        if (cumulative >= target && weights[i] > 0) {
            return candidates[i].second;
        }
    }
    return candidates[keep - 1].second;
}

// The distribution pick_from draws from: one token for greedy, else the
// kept candidates with their normalised tempered weights.
Distribution distribution_of(std::vector<std::pair<float, std::int32_t>>& candidates,
                             const SamplingParams& params) {
    if (params.temperature <= 0.0f) {
        return {{std::min_element(candidates.begin(), candidates.end(), by_logit)->second, 1.0}};
    }
    const std::size_t keep = apply_filters(candidates, params);
    const std::vector<double> weights = tempered_weights(candidates, keep, params.temperature);
    double total = 0;
    for (const double w : weights) {
        total += w;
    }
    Distribution result;
    result.reserve(keep);
    for (std::size_t i = 0; i < keep; ++i) {
        if (weights[i] > 0) {
            result.push_back({candidates[i].second, weights[i] / total});
        }
    }
    return result;
}

} // namespace

std::int32_t greedy_token(std::span<const float> logits) {
    const std::size_t n = logits.size();
    if (n == 0 || std::isnan(logits[0])) {
        return 0;
    }
    // Lane-wise maxima (x > m ? x : m is one max instruction; NaNs lose),
    // then the first logit equal to the largest.
    constexpr std::size_t kLanes = 16;
    float lanes[kLanes];
    std::fill(std::begin(lanes), std::end(lanes), -std::numeric_limits<float>::infinity());
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (std::size_t j = 0; j < kLanes; ++j) {
            const float x = logits[i + j];
            lanes[j] = x > lanes[j] ? x : lanes[j];
        }
    }
    float best = -std::numeric_limits<float>::infinity();
    for (const float lane : lanes) {
        best = lane > best ? lane : best;
    }
    for (; i < n; ++i) {
        best = logits[i] > best ? logits[i] : best;
    }
    for (i = 0; i < n; ++i) {
        if (logits[i] == best) {
            return static_cast<std::int32_t>(i);
        }
    }
    return 0; // not reached: logits[0] is a number, so `best` is one of them
}

std::int32_t pick_token(std::span<const float> logits, const SamplingParams& params, double u) {
    if (params.temperature <= 0.0f) {
        return greedy_token(logits);
    }
    std::vector<std::pair<float, std::int32_t>> candidates(logits.size());
    for (std::size_t i = 0; i < logits.size(); ++i) {
        candidates[i] = {logits[i], static_cast<std::int32_t>(i)};
    }
    return pick_from(candidates, params, u);
}

double Sampler::draw_uniform() {
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

void Sampler::load_candidates(std::span<const float> logits,
                              std::span<const std::int32_t> history) {
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
}

std::int32_t Sampler::sample(std::span<const float> logits, std::span<const std::int32_t> history) {
    if (params_.temperature <= 0.0f &&
        (params_.repetition_penalty == 1.0f || params_.repetition_window <= 0)) {
        return greedy_token(logits); // no penalty to apply: straight off the logits
    }
    load_candidates(logits, history);
    return pick_from(candidates_, params_, params_.temperature > 0.0f ? draw_uniform() : 0.0);
}

Distribution Sampler::distribution(std::span<const float> logits,
                                   std::span<const std::int32_t> history) {
    load_candidates(logits, history);
    return distribution_of(candidates_, params_);
}

std::int32_t draw_from(const Distribution& distribution, double u) {
    double cumulative = 0;
    for (const TokenProbability& t : distribution) {
        cumulative += t.probability;
        if (cumulative > u && t.probability > 0) {
            return t.token;
        }
    }
    return distribution.empty() ? -1 : distribution.back().token;
}

} // namespace kvscope::sampling
