// What a build's runs cost when nothing got in their way, and whether one
// build costs more than another, judged on a machine that slows down in
// spells. A virtual CPU on a shared host runs some stretches of seconds far
// slower (measured on this project's CI machine: +40% engine CPU time in a
// third of the runs, in spells of several runs), and a spell only ever adds
// time. So each side's cost is its per-step floor: for every step of the
// workload (the same work in every run), the least CPU time any of the
// side's runs took for it, summed over the steps. A spell that slowed a run
// leaves the floor alone as long as another run of that side took the step
// unhurried.
//
// The test is a randomisation test over a gate's rounds: the two runs of a
// round ran side by side, and it takes that under "no change" either could
// have been the base (the gate alternates which runs first, so a round's
// order favours neither side), ranking the observed floor ratio among the
// ratios of every relabelling (each round's pair swapped or not). Exact up
// to 12 rounds; past that a fixed sample of relabellings (the same every
// time, so a verdict does not change between two reads of the same files).
// The interval inverts the test: the ratios r for which new runs divided by
// r are not told apart from the base.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kvscope::profiler {

struct FloorComparison {
    double base = 0;      // sum over steps (stretches) of the least cost over the base runs
    double now = 0;       // the same over the new runs
    double ratio = 1;     // now / base
    double p_greater = 1; // one-sided p-value that new costs more
    double p_less = 1;    // one-sided p-value that new costs less
    // The ratio's interval at `confidence`; low 0 or high infinity when the
    // rounds are too few to bound it.
    double low = 0;
    double high = 0;
    double confidence = 0;
    std::int64_t rounds = 0;
    std::int64_t relabellings = 0; // ranked against; 2^rounds when exact
    bool exact = true;

    bool bounded() const;
};

// base[r] and now[r] are round r's two runs, each its cost per step (CPU
// time), every run with the same steps. Nothing when the runs' steps do not
// line up (different counts: the runs did different work), a cost is not
// positive and finite, or there are fewer than two rounds. Workloads of many
// steps are judged on up to 64 stretches of consecutive steps.
std::optional<FloorComparison> compare_step_floors(const std::vector<std::vector<double>>& base,
                                                   const std::vector<std::vector<double>>& now,
                                                   double confidence);

} // namespace kvscope::profiler
