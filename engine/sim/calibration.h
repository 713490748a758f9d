// kvscope simulate --calibrate: the cost model measured instead of
// estimated. Steps of known shapes (prefill chunks of several lengths; decode
// batches of several sizes at several contexts) run on a real backend, each
// timed; the four coefficients are then fitted to the times by least squares
// (none negative). The work of a step is counted by SimulatedBackend::
// work_of, the same function that advances the simulated clock, so the fit
// and the replay read steps alike.
#pragma once

#include "engine/runner/backend.h"
#include "engine/sim/cost_model.h"

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace kvscope::sim {

struct MeasuredStep {
    StepWork work;
    double seconds = 0;
};

struct CalibrationPlan {
    std::vector<int> prefill_tokens{32, 128, 384}; // one sequence, from empty
    std::vector<int> decode_batches{1, 4, 16};
    std::vector<int> decode_contexts{32, 256};
    int repeats = 3; // each shape timed this often
};

// The KV tokens measure_steps() needs the backend's pool to hold.
std::int64_t calibration_tokens(const CalibrationPlan& plan, int block_size);

// Times the plan's steps on `backend` (a warm-up step first, untimed).
// `progress` (may be empty) is told what runs. Throws std::runtime_error
// when the pool is too small.
std::vector<MeasuredStep>
measure_steps(runner::Backend& backend, const CalibrationPlan& plan,
              const std::function<void(const std::string&)>& progress = {});

// Non-negative coefficients that fit `steps` (least squares on the seconds;
// a coefficient that comes out negative is held at 0 and the rest fitted
// again - an active-set approximation of non-negative least squares, exact
// when at most one is held); `source` says where they come from. Throws
// std::invalid_argument for fewer steps than coefficients.
CostModel fit_cost_model(std::span<const MeasuredStep> steps, std::string source);

} // namespace kvscope::sim
