// Comparing two recordings for regression gates: each timing metric is
// judged on its per-step or per-request samples with a one-sided
// Mann-Whitney U test (no assumption of normal, noise-free timings), and
// flagged only when the shift is both significant and larger than a
// threshold, so two runs of the same build pass and a slower one fails.
#pragma once

#include "profiler/recording_stats.h"

#include <string>
#include <vector>

namespace kvscope::profiler {

struct CompareOptions {
    double threshold = 0.10;     // relative change of the median that counts (timings)
    double alpha = 0.01;         // significance level of the one-sided test
    double hit_rate_drop = 0.02; // absolute drop of the prefix hit rate that counts
};

enum class Verdict { same, improved, regressed, not_comparable };

struct MetricComparison {
    std::string name;
    std::string unit;
    double base = 0; // median for sampled metrics, the value otherwise
    double now = 0;
    double change = 0;   // relative (now - base) / base
    double p_value = -1; // -1: no test (a single number)
    std::int64_t base_samples = 0;
    std::int64_t new_samples = 0;
    Verdict verdict = Verdict::same;
};

std::string_view verdict_name(Verdict verdict);

// One-sided p-value that `worse` tends to be larger than `better`
// (Mann-Whitney U, normal approximation with tie correction).
double mann_whitney_greater(const std::vector<double>& better, const std::vector<double>& worse);

std::vector<MetricComparison> compare_stats(const RecordingStats& base, const RecordingStats& now,
                                            const CompareOptions& options);

// The cells of one row of `kvscope compare`'s table, as text, so the CLI and
// the app's compare view print the same numbers the same way.
struct MetricCells {
    std::string metric;  // "step time"
    std::string unit;    // "ms", "%", "" for counts
    std::string base;    // "12.345"
    std::string now;     // "13.000"
    std::string change;  // "+5.3%"
    std::string p_value; // "0.0012", "-" when no test was made
    std::string samples; // "60/58", "-" for single numbers
    std::string verdict; // verdict_name()
};
MetricCells format_metric(const MetricComparison& m);

// How many metrics regressed: what the gate fails on.
int count_regressions(const std::vector<MetricComparison>& rows);

// The criteria behind the verdicts, in words (the CLI's table footer).
std::string compare_criteria(const CompareOptions& options);

} // namespace kvscope::profiler
