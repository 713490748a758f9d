#include "profiler/rank_interval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kvscope::profiler {
namespace {

// Coefficients of the q-binomial coefficient [n + m choose n]_q: entry u
// counts the orderings of n and m values in which u pairs have the second
// sample's value first, i.e. U = u. Built as the product over i of
// (1 - q^(m+i)) / (1 - q^i); after each i the polynomial is [m+i choose i]_q,
// whose coefficients are whole counts.
std::vector<long double> u_counts(int n, int m) {
    const int top = n * m;
    std::vector<long double> c(static_cast<std::size_t>(top) + 1, 0.0L);
    c[0] = 1;
    for (int i = 1; i <= n; ++i) {
        const int grow = m + i;
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
        long double all = 0;
        for (const long double v : c) {
            all += v;
        }
        long double below = 0;
        for (const long double v : c) {
            below += v;
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
            return cdf_[static_cast<std::size_t>(std::floor(u))];
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
    const std::size_t count = walsh.size();
    RatioInterval r;
    r.ratio =
        std::exp(count % 2 ? walsh[count / 2] : 0.5 * (walsh[count / 2 - 1] + walsh[count / 2]));
    const SignedRankDistribution distribution(n);
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
        r.low = std::exp(walsh[static_cast<std::size_t>(k - 1)]);
        r.high = std::exp(walsh[count - static_cast<std::size_t>(k)]);
        r.confidence = 1 - 2 * distribution.cdf(k - 1);
    }
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
    // P(W+ >= w) = P(W+ <= top - w) by symmetry; ceil for a half rank.
    r.p_greater = w_distribution.cdf(top - std::ceil(w_plus));
    r.p_less = w_distribution.cdf(w_plus);
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
    RatioInterval r;
    const double mid = pairs % 2 ? d[pairs / 2] : 0.5 * (d[pairs / 2 - 1] + d[pairs / 2]);
    r.ratio = std::exp(mid);

    // The interval is [d_(k), d_(pairs + 1 - k)] (1-based) for the largest k
    // with P(U <= k - 1) <= (1 - confidence) / 2.
    const UDistribution distribution(n, m);
    const double tail = (1 - confidence) / 2;
    int k = 0;
    while (k < static_cast<int>(pairs / 2) && distribution.cdf(k) <= tail) {
        ++k;
    }
    if (k == 0) {
        r.low = 0;
        r.high = std::numeric_limits<double>::infinity();
        r.confidence = 1;
    } else {
        r.low = std::exp(d[static_cast<std::size_t>(k - 1)]);
        r.high = std::exp(d[pairs - static_cast<std::size_t>(k)]);
        r.confidence = 1 - 2 * distribution.cdf(k - 1);
    }
    const double u = u_statistic(base, now);
    // P(U >= u) by symmetry: P(U <= pairs - u).
    r.p_greater = distribution.cdf(static_cast<double>(pairs) - u);
    r.p_less = distribution.cdf(u);
    return r;
}

} // namespace kvscope::profiler
