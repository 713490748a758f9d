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

} // namespace kvscope::profiler
