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

// The greedy pick: the first token of the largest logit (NaNs never win, but
// a NaN first logit picks token 0, as a stable sort by logit would). Over the
// logits in place, sixteen lanes at a time: at a vocabulary of 262,144 (Gemma
// 3) copying them into (logit, id) pairs first took milliseconds a row.
std::int32_t greedy_token(std::span<const float> logits);

// One token's probability in a (sparse) distribution.
struct TokenProbability {
    std::int32_t token = 0;
    double probability = 0;
    bool operator==(const TokenProbability&) const = default;
};
// The tokens a sampler can pick with their probabilities (summing to 1);
// tokens not listed have none. Speculative decoding's rejection sampling
// reads it (engine/spec).
using Distribution = std::vector<TokenProbability>;

// The token at u in [0, 1) of the distribution's cumulative sum, in its
// listed order; -1 when it is empty.
std::int32_t draw_from(const Distribution& distribution, double u);

class Sampler {
public:
    explicit Sampler(const SamplingParams& params);

    // `history`: the sequence so far (prompt and generated), for the penalty.
    std::int32_t sample(std::span<const float> logits, std::span<const std::int32_t> history);

    // The distribution sample() draws from for these logits: after the
    // penalty and the filters, with the temperature (greedy: its one token).
    Distribution distribution(std::span<const float> logits, std::span<const std::int32_t> history);

    const SamplingParams& params() const { return params_; }
    // The next draw from this sampler's generator, for a sampler on a device
    // that picks with pick_token's rule: the sequence of draws stays the
    // CPU's, so a seed still repeats a run.
    double draw_uniform();

private:
    // Fills candidates_ with the logits and their ids, penalised.
    void load_candidates(std::span<const float> logits, std::span<const std::int32_t> history);

    SamplingParams params_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, std::int32_t>> candidates_; // reused between calls
};

} // namespace kvscope::sampling
