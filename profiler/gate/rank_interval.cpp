#include "profiler/gate/rank_interval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kvscope::profiler {
namespace {

// Coefficients of the q-binomial coefficient [n + m choose n]_q: entry u
// counts the orderings of n and m values in which u pairs have the second
// sample's value first, i.e. U = u. Built as the product over i of
// (1 - q^(m+i)) / (1 - q^i) over the smaller sample (the coefficient is
// symmetric in n and m); after each i the polynomial is [m+i choose i]_q,
// whose coefficients are whole counts. Past 2^64 the subtractions leave the
// upper half's entries to rounding: only the lower half is read.
std::vector<long double> u_counts(int n, int m) {
    const int top = n * m;
    const int small = std::min(n, m);
    const int big = std::max(n, m);
    std::vector<long double> c(static_cast<std::size_t>(top) + 1, 0.0L);
    c[0] = 1;
    for (int i = 1; i <= small; ++i) {
        const int grow = big + i;
        for (int u = top; u >= grow; --u) {
            c[static_cast<std::size_t>(u)] -= c[static_cast<std::size_t>(u - grow)];
        }
        for (int u = i; u <= top; ++u) {
            c[static_cast<std::size_t>(u)] += c[static_cast<std::size_t>(u - i)];
        }
    }
    return c;
}

double normal_cdf(double z) {
    return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

// P(U <= u) for every whole u, or empty past kExactPairs.
class UDistribution {
public:
    UDistribution(int n, int m)
        : n_(n)
        , m_(m) {
        if (static_cast<double>(n) * m > kExactPairs) {
            return;
        }
        const std::vector<long double> c = u_counts(n, m);
        // Every ordering: C(n + m, n).
        long double all = 1;
        for (int i = 1; i <= std::min(n, m); ++i) {
            all = all * (std::max(n, m) + i) / i;
        }
        long double below = 0;
        for (std::size_t u = 0; u <= c.size() / 2; ++u) {
            below += c[u];
            cdf_.push_back(static_cast<double>(below / all));
        }
    }

    double cdf(double u) const {
        const double pairs = static_cast<double>(n_) * m_;
        if (u < 0) {
            return 0;
        }
        if (u >= pairs) {
            return 1;
        }
        if (!cdf_.empty()) {
            const auto whole = static_cast<std::size_t>(std::floor(u));
            if (whole < cdf_.size()) {
                return cdf_[whole];
            }
            // The upper half by symmetry: P(U <= u) = 1 - P(U <= pairs - u - 1).
            return 1 - cdf_[static_cast<std::size_t>(pairs) - whole - 1];
        }
        const double mean = pairs / 2;
        const double sd = std::sqrt(pairs * (n_ + m_ + 1) / 12.0);
        return normal_cdf((std::floor(u) + 0.5 - mean) / sd); // continuity correction
    }

private:
    int n_;
    int m_;
    std::vector<double> cdf_;
};

// U of `now` over `base`: pairs in which now's value is the larger, ties
// counting a half.
double u_statistic(const std::vector<double>& base, const std::vector<double>& now) {
    double u = 0;
    for (const double x : now) {
        for (const double y : base) {
            u += x > y ? 1.0 : x == y ? 0.5 : 0.0;
        }
    }
    return u;
}

// P(W+ <= w) for every whole w, or empty past kExactSignedRanks.
class SignedRankDistribution {
public:
    explicit SignedRankDistribution(int n)
        : n_(n) {
        if (n > kExactSignedRanks) {
            return;
        }
        const int top = n * (n + 1) / 2;
        // Subsets of {1..n} counted by their sum: the product of (1 + q^i).
        std::vector<long double> c(static_cast<std::size_t>(top) + 1, 0.0L);
        c[0] = 1;
        for (int i = 1; i <= n; ++i) {
            for (int w = top; w >= i; --w) {
                c[static_cast<std::size_t>(w)] += c[static_cast<std::size_t>(w - i)];
            }
        }
        const long double all = std::pow(2.0L, n);
        long double below = 0;
        for (const long double v : c) {
            below += v;
            cdf_.push_back(static_cast<double>(below / all));
        }
    }

    double cdf(double w) const {
        const double top = n_ * (n_ + 1) / 2.0;
        if (w < 0) {
            return 0;
        }
        if (w >= top) {
            return 1;
        }
        if (!cdf_.empty()) {
            return cdf_[static_cast<std::size_t>(std::floor(w))];
        }
        const double mean = top / 2;
        const double sd = std::sqrt(n_ * (n_ + 1.0) * (2 * n_ + 1) / 24);
        return normal_cdf((std::floor(w) + 0.5 - mean) / sd);
    }

private:
    int n_;
    std::vector<double> cdf_;
};

void check_positive(const std::vector<double>& base, const std::vector<double>& now,
                    const char* who) {
    if (base.empty() || now.empty()) {
        throw std::invalid_argument(std::string(who) + " needs two non-empty samples");
    }
    for (const auto* sample : {&base, &now}) {
        for (const double v : *sample) {
            if (!(v > 0) || !std::isfinite(v)) {
                throw std::invalid_argument(std::string(who) + " takes positive finite values");
            }
        }
    }
}

// The ratio and its interval from sorted log differences (pairwise
// differences, or Walsh averages): the median, and [x_(k), x_(N + 1 - k)]
// (1-based) for the largest k with P(statistic <= k - 1) <= (1 - confidence)
// / 2, the statistic being the one whose null distribution is given.
template <class Distribution>
RatioInterval estimate(const std::vector<double>& sorted, const Distribution& distribution,
                       double confidence) {
    const std::size_t count = sorted.size();
    RatioInterval r;
    r.ratio =
        std::exp(count % 2 ? sorted[count / 2] : 0.5 * (sorted[count / 2 - 1] + sorted[count / 2]));
    const double tail = (1 - confidence) / 2;
    int k = 0;
    while (k < static_cast<int>(count / 2) && distribution.cdf(k) <= tail) {
        ++k;
    }
    if (k == 0) {
        r.low = 0;
        r.high = std::numeric_limits<double>::infinity();
        r.confidence = 1;
    } else {
        r.low = std::exp(sorted[static_cast<std::size_t>(k - 1)]);
        r.high = std::exp(sorted[count - static_cast<std::size_t>(k)]);
        r.confidence = 1 - 2 * distribution.cdf(k - 1);
    }
    return r;
}

} // namespace

double signed_rank_cdf(int n, double w) {
    if (n <= 0) {
        throw std::invalid_argument("signed_rank_cdf needs at least one difference");
    }
    return SignedRankDistribution(n).cdf(w);
}

RatioInterval paired_ratio_interval(const std::vector<double>& base, const std::vector<double>& now,
                                    double confidence) {
    check_positive(base, now, "paired_ratio_interval");
    if (base.size() != now.size()) {
        throw std::invalid_argument("paired_ratio_interval needs as many runs on each side");
    }
    std::vector<double> d;
    for (std::size_t i = 0; i < base.size(); ++i) {
        d.push_back(std::log(now[i]) - std::log(base[i]));
    }
    const int n = static_cast<int>(d.size());
    // Walsh averages: (d_i + d_j) / 2 for i <= j.
    std::vector<double> walsh;
    for (int i = 0; i < n; ++i) {
        for (int j = i; j < n; ++j) {
            walsh.push_back(0.5 *
                            (d[static_cast<std::size_t>(i)] + d[static_cast<std::size_t>(j)]));
        }
    }
    std::sort(walsh.begin(), walsh.end());
    RatioInterval r = estimate(walsh, SignedRankDistribution(n), confidence);
    // W+ over the non-zero differences, ranks of |d| averaged over ties.
    std::vector<double> nonzero;
    for (const double x : d) {
        if (x != 0) {
            nonzero.push_back(x);
        }
    }
    if (nonzero.empty()) {
        return r; // p-values stay 1: no evidence either way
    }
    std::vector<std::size_t> order(nonzero.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return std::abs(nonzero[a]) < std::abs(nonzero[b]);
    });
    double w_plus = 0;
    for (std::size_t i = 0; i < order.size();) {
        std::size_t j = i;
        while (j < order.size() && std::abs(nonzero[order[j]]) == std::abs(nonzero[order[i]])) {
            ++j;
        }
        const double rank = 0.5 * static_cast<double>(i + 1 + j);
        for (std::size_t k2 = i; k2 < j; ++k2) {
            w_plus += nonzero[order[k2]] > 0 ? rank : 0;
        }
        i = j;
    }
    const int used = static_cast<int>(nonzero.size());
    const SignedRankDistribution w_distribution(used);
    const double top = used * (used + 1) / 2.0;
    // P(W+ >= w) = P(W+ <= top - w) by symmetry.
    // Half ranks (ties) round toward no difference: conservative p-values.
    r.p_greater = w_distribution.cdf(top - std::floor(w_plus));
    r.p_less = w_distribution.cdf(std::ceil(w_plus));
    return r;
}

double mann_whitney_cdf(int n, int m, double u) {
    if (n <= 0 || m <= 0) {
        throw std::invalid_argument("mann_whitney_cdf needs two non-empty samples");
    }
    return UDistribution(n, m).cdf(u);
}

bool RatioInterval::bounded() const {
    return low > 0 && std::isfinite(high);
}

RatioInterval ratio_interval(const std::vector<double>& base, const std::vector<double>& now,
                             double confidence) {
    check_positive(base, now, "ratio_interval");
    const int n = static_cast<int>(now.size());
    const int m = static_cast<int>(base.size());
    // Differences of logarithms: a shift there is a ratio of the values.
    std::vector<double> d;
    d.reserve(static_cast<std::size_t>(n) * static_cast<std::size_t>(m));
    for (const double x : now) {
        for (const double y : base) {
            d.push_back(std::log(x) - std::log(y));
        }
    }
    std::sort(d.begin(), d.end());
    const std::size_t pairs = d.size();
    const UDistribution distribution(n, m);
    RatioInterval r = estimate(d, distribution, confidence);
    const double u = u_statistic(base, now);
    // P(U >= u) by symmetry: P(U <= pairs - u).
    // Half pairs (ties) round toward no difference: conservative p-values.
    r.p_greater = distribution.cdf(static_cast<double>(pairs) - std::floor(u));
    r.p_less = distribution.cdf(std::ceil(u));
    return r;
}

} // namespace kvscope::profiler
