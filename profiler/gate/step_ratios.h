// A gate's rounds recorded in step (kvscope gate --interleave steps): the two
// builds took the engine's steps in turns, so a round's step i of one build
// ran within moments of the other's, on the same CPU. Whatever slowed the
// machine then slowed both, and the ratio of their CPU times for that step
// keeps what the builds differ by. A round's change is the median of its
// steps' ratios: a step that an interrupt or a neighbour's burst hit on one
// side only moves it little. Across rounds the gate treats these as paired
// values (signed-rank test, rank interval), as it does run totals.
//
// The median tells how much slower the typical step is. A change confined to
// a few steps (the first, say) barely moves it; the run totals row beside it
// in compare catches those when they are large.
#pragma once

#include <optional>
#include <vector>

namespace kvscope::profiler {

// base[r] and now[r] are round r's two runs, each its CPU time per step.
// Each round's median step ratio (now / base). Nothing when the rounds do not
// pair up, a round's runs have different step counts (different work), or a
// time is not positive and finite.
std::optional<std::vector<double>> round_step_ratios(const std::vector<std::vector<double>>& base,
                                                     const std::vector<std::vector<double>>& now);

} // namespace kvscope::profiler
