// Picks the next token from logits: greedy, or random after the usual
// filters, in llama.cpp's order (repetition penalty, top-k, top-p, min-p,
// temperature). Seeded, so a run can be repeated exactly.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace kvscope::sampling {

struct SamplingParams {
    float temperature = 0.8f;        // <= 0: greedy (argmax)
    int top_k = 40;                  // <= 0: off
    float top_p = 0.95f;             // >= 1: off
    float min_p = 0.05f;             // <= 0: off; relative to the most likely token
    float repetition_penalty = 1.0f; // 1: off; > 1 discourages recent tokens
    int repetition_window = 64;      // how many recent tokens the penalty looks at
    std::uint64_t seed = 0;

    // Empty when valid, else what is wrong (for command-line errors).
    std::string problem() const;
};

// The token `params` pick from `logits` (no repetition penalty) for the
// draw u in [0, 1): greedy ignores u; otherwise the candidates in descending
// logit order (ties: lower id first) are cut by top-k, then top-p and min-p
// on the probabilities before the temperature, and the pick is the first
// whose cumulative tempered weight reaches u of their total. The CPU sampler
// draws u from its generator; the CUDA sampling kernel computes this same
// function, so the two agree given the same u.
std::int32_t pick_token(std::span<const float> logits, const SamplingParams& params, double u);

class Sampler {
public:
    explicit Sampler(const SamplingParams& params);

    // `history`: the sequence so far (prompt and generated), for the penalty.
    std::int32_t sample(std::span<const float> logits, std::span<const std::int32_t> history);

    const SamplingParams& params() const { return params_; }
    // The next draw from this sampler's generator, for a sampler on a device
    // that picks with pick_token's rule: the sequence of draws stays the
    // CPU's, so a seed still repeats a run.
    double draw_uniform();

private:
    SamplingParams params_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, std::int32_t>> candidates_; // reused between calls
};

} // namespace kvscope::sampling
