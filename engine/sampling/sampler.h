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

class Sampler {
public:
    explicit Sampler(const SamplingParams& params);

    // `history`: the sequence so far (prompt and generated), for the penalty.
    std::int32_t sample(std::span<const float> logits, std::span<const std::int32_t> history);

    const SamplingParams& params() const { return params_; }

private:
    SamplingParams params_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, std::int32_t>> candidates_; // reused between calls
};

} // namespace kvscope::sampling
