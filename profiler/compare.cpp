#include "profiler/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace kvscope::profiler {
namespace {

double median(std::vector<double> v) {
    if (v.empty()) {
        return 0;
    }
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Timings: lower is better.
MetricComparison compare_samples(const std::string& name, const std::vector<double>& base,
                                 const std::vector<double>& now, const CompareOptions& options) {
    MetricComparison m;
    m.name = name;
    m.unit = "ms";
    m.base_samples = static_cast<std::int64_t>(base.size());
    m.new_samples = static_cast<std::int64_t>(now.size());
    if (base.size() < 3 || now.size() < 3) {
        m.verdict = Verdict::not_comparable;
        m.base = median(base);
        m.now = median(now);
        return m;
    }
    m.base = median(base);
    m.now = median(now);
    m.change = m.base > 0 ? (m.now - m.base) / m.base : 0;
    const double p_slower = mann_whitney_greater(base, now);
    const double p_faster = mann_whitney_greater(now, base);
    if (m.change > options.threshold && p_slower < options.alpha) {
        m.verdict = Verdict::regressed;
        m.p_value = p_slower;
    } else if (m.change < -options.threshold && p_faster < options.alpha) {
        m.verdict = Verdict::improved;
        m.p_value = p_faster;
    } else {
        m.p_value = std::min(p_slower, p_faster);
    }
    return m;
}

} // namespace

std::string_view verdict_name(Verdict verdict) {
    switch (verdict) {
    case Verdict::same:
        return "same";
    case Verdict::improved:
        return "improved";
    case Verdict::regressed:
        return "REGRESSED";
    case Verdict::not_comparable:
        return "too few samples";
    }
    return "?";
}

double mann_whitney_greater(const std::vector<double>& better, const std::vector<double>& worse) {
    const double n1 = static_cast<double>(better.size());
    const double n2 = static_cast<double>(worse.size());
    if (better.empty() || worse.empty()) {
        return 1.0;
    }
    struct Item {
        double value;
        bool from_worse;
    };
    std::vector<Item> all;
    for (const double v : better) {
        all.push_back({v, false});
    }
    for (const double v : worse) {
        all.push_back({v, true});
    }
    std::sort(all.begin(), all.end(),
              [](const Item& a, const Item& b) { return a.value < b.value; });
    // Average ranks over ties, and the tie correction term.
    double rank_sum_worse = 0;
    double tie_term = 0;
    for (std::size_t i = 0; i < all.size();) {
        std::size_t j = i;
        while (j < all.size() && all[j].value == all[i].value) {
            ++j;
        }
        const double rank = 0.5 * static_cast<double>(i + 1 + j); // ranks i+1 .. j
        const double t = static_cast<double>(j - i);
        tie_term += t * t * t - t;
        for (std::size_t k = i; k < j; ++k) {
            rank_sum_worse += all[k].from_worse ? rank : 0;
        }
        i = j;
    }
    const double u = rank_sum_worse - n2 * (n2 + 1) / 2; // pairs where worse > better
    const double n = n1 + n2;
    const double mean = n1 * n2 / 2;
    const double variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)));
    if (variance <= 0) {
        return u > mean ? 0.0 : 1.0;
    }
    const double z = (u - mean - 0.5) / std::sqrt(variance); // continuity correction
    return 0.5 * std::erfc(z / std::sqrt(2.0));
}

std::vector<MetricComparison> compare_stats(const RecordingStats& base, const RecordingStats& now,
                                            const CompareOptions& options) {
    std::vector<MetricComparison> out;
    out.push_back(compare_samples("step time", base.step_ms_samples, now.step_ms_samples, options));
    out.push_back(
        compare_samples("time to first token", base.ttft_ms_samples, now.ttft_ms_samples, options));
    out.push_back(compare_samples("time per output token", base.tpot_ms_samples,
                                  now.tpot_ms_samples, options));
    MetricComparison hits;
    hits.name = "prefix hit rate";
    hits.unit = "%";
    hits.base = 100 * base.prefix_hit_rate;
    hits.now = 100 * now.prefix_hit_rate;
    hits.change = base.prefix_hit_rate > 0
                      ? (now.prefix_hit_rate - base.prefix_hit_rate) / base.prefix_hit_rate
                      : 0;
    if (base.prefix_hit_rate - now.prefix_hit_rate > options.hit_rate_drop) {
        hits.verdict = Verdict::regressed;
    } else if (now.prefix_hit_rate - base.prefix_hit_rate > options.hit_rate_drop) {
        hits.verdict = Verdict::improved;
    }
    out.push_back(hits);
    const auto informational = [&](const std::string& name, double b, double n) {
        MetricComparison m;
        m.name = name;
        m.base = b;
        m.now = n;
        m.change = b != 0 ? (n - b) / b : 0;
        out.push_back(m);
    };
    informational("preemptions", static_cast<double>(base.preemptions),
                  static_cast<double>(now.preemptions));
    informational("peak used blocks", static_cast<double>(base.peak_used_blocks),
                  static_cast<double>(now.peak_used_blocks));
    informational("generated tokens", static_cast<double>(base.generated_tokens),
                  static_cast<double>(now.generated_tokens));
    return out;
}

MetricCells format_metric(const MetricComparison& m) {
    // snprintf rather than streams: the conversions `kvscope compare` always
    // printed, so tables in CI logs stay comparable across versions.
    char buffer[64];
    MetricCells cells;
    cells.metric = m.name;
    cells.unit = m.unit;
    std::snprintf(buffer, sizeof buffer, "%.3f", m.base);
    cells.base = buffer;
    std::snprintf(buffer, sizeof buffer, "%.3f", m.now);
    cells.now = buffer;
    std::snprintf(buffer, sizeof buffer, "%+.1f%%", 100 * m.change);
    cells.change = buffer;
    cells.p_value = "-";
    if (m.p_value >= 0) {
        std::snprintf(buffer, sizeof buffer, "%.2g", m.p_value);
        cells.p_value = buffer;
    }
    cells.samples = "-";
    if (m.base_samples > 0 || m.new_samples > 0) {
        std::snprintf(buffer, sizeof buffer, "%lld/%lld", static_cast<long long>(m.base_samples),
                      static_cast<long long>(m.new_samples));
        cells.samples = buffer;
    }
    cells.verdict = verdict_name(m.verdict);
    return cells;
}

int count_regressions(const std::vector<MetricComparison>& rows) {
    return static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const MetricComparison& m) {
        return m.verdict == Verdict::regressed;
    }));
}

std::string compare_criteria(const CompareOptions& options) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "Timings (medians) regress when more than %.0f%% slower with p < %.3g "
                  "(one-sided Mann-Whitney U); the prefix hit rate when it drops by more than "
                  "%.0f points.",
                  100 * options.threshold, options.alpha, 100 * options.hit_rate_drop);
    return text;
}

} // namespace kvscope::profiler
