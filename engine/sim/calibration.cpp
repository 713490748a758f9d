#include "engine/sim/calibration.h"

#include "engine/kv/block_allocator.h"
#include "engine/runner/forward_batch.h"
#include "engine/sim/simulated_backend.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <stdexcept>

namespace kvscope::sim {
namespace {

constexpr int kPrefillChunk = 512; // untimed prefills that set up a decode context
constexpr std::size_t kTerms = 4;  // step, prefill token, decode sequence, KV token read

using Row = std::array<double, kTerms>;

Row features(const StepWork& w) {
    return {1.0, static_cast<double>(w.prefill_tokens), static_cast<double>(w.decode_sequences),
            static_cast<double>(w.kv_tokens_read)};
}

// Least squares over the terms in `active` (the others held at 0), by the
// normal equations with the columns scaled to 1 (the terms differ by
// orders of magnitude). Gaussian elimination with partial pivoting.
Row solve(std::span<const MeasuredStep> steps, const std::array<bool, kTerms>& active) {
    Row scale{};
    for (const MeasuredStep& s : steps) {
        const Row f = features(s.work);
        for (std::size_t j = 0; j < kTerms; ++j) {
            scale[j] = std::max(scale[j], std::abs(f[j]));
        }
    }
    std::array<std::array<double, kTerms + 1>, kTerms> m{};
    for (const MeasuredStep& s : steps) {
        Row f = features(s.work);
        for (std::size_t j = 0; j < kTerms; ++j) {
            f[j] = active[j] && scale[j] > 0 ? f[j] / scale[j] : 0.0;
        }
        for (std::size_t i = 0; i < kTerms; ++i) {
            for (std::size_t j = 0; j < kTerms; ++j) {
                m[i][j] += f[i] * f[j];
            }
            m[i][kTerms] += f[i] * s.seconds;
        }
    }
    for (std::size_t j = 0; j < kTerms; ++j) {
        if (!active[j] || scale[j] == 0) {
            m[j] = {};
            m[j][j] = 1.0; // the term is 0
        }
    }
    for (std::size_t col = 0; col < kTerms; ++col) {
        std::size_t pivot = col;
        for (std::size_t r = col + 1; r < kTerms; ++r) {
            if (std::abs(m[r][col]) > std::abs(m[pivot][col])) {
                pivot = r;
            }
        }
        std::swap(m[col], m[pivot]);
        if (std::abs(m[col][col]) < 1e-12) {
            m[col] = {};
            m[col][col] = 1.0; // no information on this term: 0
            continue;
        }
        for (std::size_t r = 0; r < kTerms; ++r) {
            if (r != col) {
                const double factor = m[r][col] / m[col][col];
                for (std::size_t c = col; c <= kTerms; ++c) {
                    m[r][c] -= factor * m[col][c];
                }
            }
        }
    }
    Row out{};
    for (std::size_t j = 0; j < kTerms; ++j) {
        out[j] = active[j] && scale[j] > 0 ? m[j][kTerms] / m[j][j] / scale[j] : 0.0;
    }
    return out;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

std::int64_t calibration_tokens(const CalibrationPlan& plan, int block_size) {
    std::int64_t most = 0;
    for (const int n : plan.prefill_tokens) {
        most = std::max<std::int64_t>(most, (n + block_size - 1) / block_size * block_size);
    }
    for (const int batch : plan.decode_batches) {
        for (const int context : plan.decode_contexts) {
            const std::int64_t per_sequence =
                (context + plan.repeats + 1 + block_size - 1) / block_size * block_size;
            most = std::max<std::int64_t>(most, batch * per_sequence);
        }
    }
    return most;
}

std::vector<MeasuredStep> measure_steps(runner::Backend& backend, const CalibrationPlan& plan,
                                        const std::function<void(const std::string&)>& progress) {
    const int block_size = backend.block_size();
    if (backend.num_blocks() * static_cast<std::int64_t>(block_size) <
        calibration_tokens(plan, block_size)) {
        throw std::runtime_error("the KV pool is too small to calibrate");
    }
    kv::BlockAllocator allocator(backend.num_blocks());
    const int groups = backend.kv_groups().group_count();
    std::vector<float> logits;
    const auto token_of = [&backend](std::size_t i) {
        // Ordinary tokens, varied (the values do not change the work); past
        // the first 100 ids (special tokens) when the vocabulary has room.
        const auto vocab = static_cast<std::size_t>(std::max(1, backend.vocab_size()));
        const std::size_t first = vocab > 200 ? 100 : 0;
        return static_cast<std::int32_t>(first + i * 7919 % (vocab - first));
    };
    // Runs one step: each sequence computes its tokens; returns the time.
    const auto step = [&](std::vector<kv::SequenceBlocks>& sequences,
                          const std::vector<std::vector<std::int32_t>>& tokens,
                          std::vector<MeasuredStep>* out) {
        std::vector<runner::SequenceStep> steps;
        for (std::size_t i = 0; i < sequences.size(); ++i) {
            const auto length = sequences[i].length + static_cast<std::int32_t>(tokens[i].size());
            sequences[i].set_groups(groups);
            if (!kv::reserve(sequences[i], length, block_size, allocator)) {
                throw std::runtime_error("the KV pool is too small to calibrate");
            }
            steps.push_back({&sequences[i], tokens[i], false});
        }
        const runner::ForwardBatch batch = runner::build_forward_batch(steps, block_size);
        logits.resize(batch.logit_tokens.size() * static_cast<std::size_t>(backend.vocab_size()));
        const auto start = std::chrono::steady_clock::now();
        backend.forward(batch, logits.data());
        const double seconds = seconds_since(start);
        for (std::size_t i = 0; i < sequences.size(); ++i) {
            sequences[i].length += static_cast<std::int32_t>(tokens[i].size());
        }
        if (out != nullptr) {
            out->push_back({SimulatedBackend::work_of(batch), seconds});
        }
    };
    const auto release = [&](std::vector<kv::SequenceBlocks>& sequences) {
        for (kv::SequenceBlocks& s : sequences) {
            for (int g = 0; g < s.groups(); ++g) {
                backend.release_blocks(s.table(g));
            }
            kv::release(s, allocator);
        }
    };
    const auto prompt = [&](int n) {
        std::vector<std::int32_t> t(static_cast<std::size_t>(n));
        for (std::size_t i = 0; i < t.size(); ++i) {
            t[i] = token_of(i);
        }
        return t;
    };

    std::vector<MeasuredStep> measured;
    {
        std::vector<kv::SequenceBlocks> warm(1);
        step(warm, {prompt(16)}, nullptr);
        release(warm);
    }
    for (const int n : plan.prefill_tokens) {
        if (progress) {
            progress("prefill of " + std::to_string(n) + " tokens");
        }
        for (int r = 0; r < plan.repeats; ++r) {
            std::vector<kv::SequenceBlocks> one(1);
            step(one, {prompt(n)}, &measured);
            release(one);
        }
    }
    for (const int batch : plan.decode_batches) {
        for (const int context : plan.decode_contexts) {
            if (progress) {
                progress("decode of " + std::to_string(batch) + " sequences at " +
                         std::to_string(context) + " tokens");
            }
            std::vector<kv::SequenceBlocks> sequences(static_cast<std::size_t>(batch));
            for (std::size_t s = 0; s < sequences.size(); ++s) {
                std::vector<kv::SequenceBlocks> one(1);
                std::swap(one[0], sequences[s]);
                for (int done = 0; done < context; done += kPrefillChunk) {
                    step(one, {prompt(std::min(kPrefillChunk, context - done))}, nullptr);
                }
                std::swap(one[0], sequences[s]);
            }
            const std::vector<std::vector<std::int32_t>> next(
                sequences.size(), std::vector<std::int32_t>{token_of(3)});
            for (int r = 0; r < plan.repeats; ++r) {
                step(sequences, next, &measured);
            }
            release(sequences);
        }
    }
    return measured;
}

CostModel fit_cost_model(std::span<const MeasuredStep> steps, std::string source) {
    if (steps.size() < kTerms) {
        throw std::invalid_argument("fitting a cost model needs at least four timed steps");
    }
    // Active set: fit, and while a coefficient comes out negative, hold the
    // most negative at 0 and fit the rest again.
    std::array<bool, kTerms> active{true, true, true, true};
    Row fit = solve(steps, active);
    for (;;) {
        std::size_t worst = kTerms;
        for (std::size_t j = 0; j < kTerms; ++j) {
            if (active[j] && fit[j] < 0 && (worst == kTerms || fit[j] < fit[worst])) {
                worst = j;
            }
        }
        if (worst == kTerms) {
            break;
        }
        active[worst] = false;
        fit = solve(steps, active);
    }
    CostModel model;
    model.step_s = fit[0];
    model.prefill_token_s = fit[1];
    model.decode_sequence_s = fit[2];
    model.kv_token_read_s = fit[3];
    model.source = std::move(source);
    return model;
}

} // namespace kvscope::sim
