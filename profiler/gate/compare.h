// Comparing recordings for regression gates. Three kinds of metric, kept
// apart because noise reaches them differently:
// - wall-clock timings (step time, time to first token, time per output
//   token): what users feel, and what a busy neighbour on a shared machine
//   moves most;
// - noise-robust costs (the engine thread's CPU time, instructions retired):
//   a neighbour delays the engine but barely changes how much it runs;
// - work (tokens computed, KV bytes written and read, prefix hits, ...):
//   fixed by the workload, so compared exactly.
// Each side is one recording or a set of repetitions. With repetitions a run
// is one sample: a timing's run-level value (its median, or a cost's total)
// is compared as a ratio new/base with an exact rank confidence interval
// (profiler/gate/rank_interval.h). With one recording a side, per-step and
// per-request samples are compared with a one-sided Mann-Whitney test, which
// a machine busier during one whole run fools: that form says so.
#pragma once

#include "profiler/recording/recording_stats.h"

#include <string>
#include <vector>

namespace kvscope::profiler {

struct CompareOptions {
    double threshold = 0.10;        // relative change that counts, wall-clock timings
    double robust_threshold = 0.02; // relative change that counts, CPU time and instructions
    double alpha = 0.01;            // one-sided significance; intervals are 1 - 2 alpha
    double hit_rate_drop = 0.02;    // absolute drop of the prefix hit rate that counts
};

// not_compared: a metric the runs' way of recording makes meaningless (request
// spans of builds that took steps in turns).
enum class Verdict {
    same,
    improved,
    regressed,
    not_comparable,
    not_measured,
    differs,
    not_compared
};

// Where a metric's judgement comes from.
enum class Basis {
    rounds,      // paired runs (a gate's rounds, matched by file name), signed ranks
    floors,      // a gate's rounds, per-step floors (profiler/gate/step_floors.h): engine CPU time
    step_ratios, // a gate's rounds recorded in step, each round's median step ratio
                 // (profiler/gate/step_ratios.h): engine CPU time
    runs,        // run-level values of unpaired repetitions, rank interval
    steps,       // per-step samples of one run a side (Mann-Whitney)
    requests,    // per-request samples of one run a side (Mann-Whitney)
    exact,       // work: equal or not
    single,      // one number a side, judged by a rule (the prefix hit rate)
};

struct MetricComparison {
    std::string name;
    std::string unit;
    double base = 0; // median for sampled metrics, the value otherwise
    double now = 0;
    double change = 0;   // relative: the estimated ratio new/base, minus 1
    double p_value = -1; // -1: no test
    // The ratio's confidence interval (run-level comparisons); 0 and 0 when
    // none was made, 0 and infinity when the runs are too few.
    double low = 0;
    double high = 0;
    double confidence = 0;
    std::int64_t base_samples = 0;
    std::int64_t new_samples = 0;
    Basis basis = Basis::single;
    bool noise_robust = false;
    Verdict verdict = Verdict::same;
};

std::string_view verdict_name(Verdict verdict);
std::string_view basis_name(Basis basis);

// One-sided p-value that `worse` tends to be larger than `better`
// (Mann-Whitney U, normal approximation with tie correction).
double mann_whitney_greater(const std::vector<double>& better, const std::vector<double>& worse);

// Each side one or more runs of the same workload (repetitions). Runs are
// paired when both sides have the same count and the same file names in
// order (what `kvscope gate` writes: round-001.sqlite, ...): a pair ran side
// by side, so the machine's drift cancels in its ratio. Over paired rounds
// whose steps line up (every run computed the same tokens step by step), the
// engine CPU time is judged step by step: on each round's median step ratio
// when the rounds were recorded in step, else on per-step floors, which the
// machine's slow spells leave alone.
bool runs_are_paired(const std::vector<RecordingStats>& base,
                     const std::vector<RecordingStats>& now);
std::vector<MetricComparison> compare_runs(const std::vector<RecordingStats>& base,
                                           const std::vector<RecordingStats>& now,
                                           const CompareOptions& options);
// One recording a side.
std::vector<MetricComparison> compare_stats(const RecordingStats& base, const RecordingStats& now,
                                            const CompareOptions& options);

// The cells of one row of `kvscope compare`'s table, as text, so the CLI and
// the app's compare view print the same numbers the same way.
struct MetricCells {
    std::string metric;   // "step time"
    std::string unit;     // "ms", "%", "" for counts
    std::string base;     // "12.345"
    std::string now;      // "13.000"
    std::string change;   // "+5.3%"
    std::string interval; // "0.98-1.03x", "-" when none
    std::string p_value;  // "0.0012", "-" when no test was made
    std::string samples;  // "60/58", "5/5 runs", "-" for single numbers
    std::string robust;   // "yes", "no", "exact"
    std::string verdict;  // verdict_name()
};
MetricCells format_metric(const MetricComparison& m);

// How many metrics regressed: what the gate fails on.
int count_regressions(const std::vector<MetricComparison>& rows);

// The criteria behind the verdicts, in words (the CLI's table footer);
// `runs_a_side` the smaller side's count of recordings.
std::string compare_criteria(const CompareOptions& options, std::size_t runs_a_side = 1);

} // namespace kvscope::profiler
