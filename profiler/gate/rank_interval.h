// How much one set of runs differs from another, judged the way the runs
// arose: each run is one sample (steps within a run share its machine's load
// and are not independent). The change is the Hodges-Lehmann estimate of the
// ratio new/base (the median of all pairwise ratios), with the exact
// distribution-free confidence interval that inverts the Mann-Whitney test
// (Bauer 1972; Hollander & Wolfe, Nonparametric Statistical Methods, 4.3):
// no assumption of normal timings, exact for the handful of runs a CI job
// makes, and the normal approximation only past a few thousand pairs.
#pragma once

#include <vector>

namespace kvscope::profiler {

// P(U <= u) under the null hypothesis, for samples of n and m distinct
// values: the exact distribution (counted through the q-binomial
// coefficient) while n * m <= kExactPairs, else the normal approximation.
inline constexpr int kExactPairs = 20000;
double mann_whitney_cdf(int n, int m, double u);

struct RatioInterval {
    double ratio = 1;      // Hodges-Lehmann estimate of new / base
    double low = 0;        // the interval's ends; 0 and +infinity when the
    double high = 0;       //   samples are too few for the confidence asked
    double confidence = 0; // what the interval attains (>= the one asked)
    double p_greater = 1;  // one-sided p-value that new tends to be larger
    double p_less = 1;     // and smaller
    bool bounded() const;
};

// Both samples positive (timings, counts). `confidence` is two-sided: its
// lower end above 1 is a one-sided test at (1 - confidence) / 2.
RatioInterval ratio_interval(const std::vector<double>& base, const std::vector<double>& now,
                             double confidence);

// P(W+ <= w) under the null hypothesis for the Wilcoxon signed-rank
// statistic of n non-zero differences: exact (subsets of 1..n by their sum)
// for n <= kExactSignedRanks, else the normal approximation.
inline constexpr int kExactSignedRanks = 200;
double signed_rank_cdf(int n, double w);

// Paired runs (base[i] and now[i] ran side by side, as a gate's rounds do):
// the ratio is the Hodges-Lehmann estimate from the per-pair log ratios (the
// median of their Walsh averages), the interval the exact one that inverts
// the signed-rank test (Hollander & Wolfe 3.3). A drift of the machine's
// speed that both runs of a pair share cancels in the pair's ratio.
RatioInterval paired_ratio_interval(const std::vector<double>& base, const std::vector<double>& now,
                                    double confidence);

} // namespace kvscope::profiler
