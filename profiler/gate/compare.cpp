#include "profiler/gate/compare.h"

#include "profiler/gate/rank_interval.h"
#include "profiler/gate/step_floors.h"
#include "profiler/gate/step_ratios.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>
#include <stdexcept>

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

// One side's values of a metric, and whether every run had one.
struct Values {
    std::vector<double> values;
    bool complete = true;
};

// Lower is better. A change's verdict: past the threshold and
// significant in its direction.
MetricComparison judge_ratio(MetricComparison m, double p_greater, double p_less, double threshold,
                             const CompareOptions& options) {
    if (m.change > threshold && p_greater < options.alpha) {
        m.verdict = Verdict::regressed;
        m.p_value = p_greater;
    } else if (m.change < -threshold && p_less < options.alpha) {
        m.verdict = Verdict::improved;
        m.p_value = p_less;
    } else {
        m.p_value = std::min(p_greater, p_less);
    }
    return m;
}

// Lower is better (timings, costs). One run a side: per-step or per-request
// samples, one-sided Mann-Whitney.
MetricComparison judge_samples(MetricComparison m, const std::vector<double>& base,
                               const std::vector<double>& now, double threshold,
                               const CompareOptions& options) {
    m.base_samples = static_cast<std::int64_t>(base.size());
    m.new_samples = static_cast<std::int64_t>(now.size());
    m.base = median(base);
    m.now = median(now);
    if (base.size() < 3 || now.size() < 3) {
        m.verdict = Verdict::not_comparable;
        return m;
    }
    m.change = m.base > 0 ? (m.now - m.base) / m.base : 0;
    const double p_slower = mann_whitney_greater(base, now);
    const double p_faster = mann_whitney_greater(now, base);
    return judge_ratio(std::move(m), p_slower, p_faster, threshold, options);
}

// Lower is better. Repetitions: one value per run, the ratio's rank interval
// (paired: per round).
MetricComparison judge_runs(MetricComparison m, const std::vector<double>& base,
                            const std::vector<double>& now, bool paired, double threshold,
                            const CompareOptions& options) {
    m.basis = paired ? Basis::rounds : Basis::runs;
    m.base_samples = static_cast<std::int64_t>(base.size());
    m.new_samples = static_cast<std::int64_t>(now.size());
    m.base = median(base);
    m.now = median(now);
    const auto positive = [](const std::vector<double>& v) {
        return std::all_of(v.begin(), v.end(), [](double x) { return x > 0 && std::isfinite(x); });
    };
    if (!positive(base) || !positive(now)) {
        m.verdict = Verdict::not_comparable;
        return m;
    }
    const double confidence = 1 - 2 * options.alpha;
    const RatioInterval r = paired ? paired_ratio_interval(base, now, confidence)
                                   : ratio_interval(base, now, confidence);
    m.change = r.ratio - 1;
    m.low = r.low;
    m.high = r.high;
    m.confidence = r.confidence;
    if (!r.bounded()) {
        m.verdict = Verdict::not_comparable; // no p-value beside it
        return m;
    }
    return judge_ratio(std::move(m), r.p_greater, r.p_less, threshold, options);
}

// Lower is better. A gate's rounds recorded in step, judged on each round's
// median step ratio (as paired values, against a base of 1); the values shown
// are the sides' median run totals.
MetricComparison judge_step_ratios(MetricComparison m, const std::vector<double>& ratios,
                                   const std::vector<double>& base_totals,
                                   const std::vector<double>& new_totals, double threshold,
                                   const CompareOptions& options) {
    m = judge_runs(std::move(m), std::vector<double>(ratios.size(), 1.0), ratios, true, threshold,
                   options);
    m.basis = Basis::step_ratios;
    m.base = median(base_totals);
    m.now = median(new_totals);
    return m;
}

// Lower is better. A gate's rounds judged on per-step floors.
MetricComparison judge_floors(MetricComparison m, const FloorComparison& f, double threshold,
                              const CompareOptions& options) {
    m.basis = Basis::floors;
    m.base_samples = f.rounds;
    m.new_samples = f.rounds;
    m.base = f.base;
    m.now = f.now;
    m.change = f.ratio - 1;
    m.low = f.low;
    m.high = f.high;
    m.confidence = f.confidence;
    if (!f.bounded()) {
        m.verdict = Verdict::not_comparable; // no p-value beside it
        return m;
    }
    return judge_ratio(std::move(m), f.p_greater, f.p_less, threshold, options);
}

MetricComparison metric(std::string name, std::string unit, bool robust) {
    MetricComparison m;
    m.name = std::move(name);
    m.unit = std::move(unit);
    m.noise_robust = robust;
    return m;
}

template <class Get>
Values run_values(const std::vector<RecordingStats>& runs, Get get) {
    Values out;
    for (const RecordingStats& s : runs) {
        const std::optional<double> v = get(s);
        if (v) {
            out.values.push_back(*v);
        } else {
            out.complete = false;
        }
    }
    return out;
}

template <class Get>
std::vector<double> pooled(const std::vector<RecordingStats>& runs, Get get) {
    std::vector<double> out;
    for (const RecordingStats& s : runs) {
        const std::vector<double>& v = get(s);
        out.insert(out.end(), v.begin(), v.end());
    }
    return out;
}

std::optional<double> median_of(const std::vector<double>& samples) {
    if (samples.empty()) {
        return std::nullopt;
    }
    return median(samples);
}

// Work fixed by the workload: equal on every run of both sides, or not.
MetricComparison exact(std::string name, std::string unit, const std::vector<RecordingStats>& base,
                       const std::vector<RecordingStats>& now,
                       std::int64_t (*get)(const RecordingStats&)) {
    MetricComparison m = metric(std::move(name), std::move(unit), true);
    m.basis = Basis::exact;
    const std::int64_t b = get(base.front());
    const std::int64_t n = get(now.front());
    m.base = static_cast<double>(b);
    m.now = static_cast<double>(n);
    m.change = b != 0 ? (m.now - m.base) / m.base : 0;
    bool equal = b == n;
    for (const auto* side : {&base, &now}) {
        for (const RecordingStats& s : *side) {
            equal = equal && get(s) == b;
        }
    }
    m.verdict = equal ? Verdict::same : Verdict::differs;
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
    case Verdict::not_measured:
        return "not measured";
    case Verdict::differs:
        return "differs";
    case Verdict::not_compared:
        return "not compared";
    }
    return "?";
}

std::string_view basis_name(Basis basis) {
    switch (basis) {
    case Basis::rounds:
        return "rounds";
    case Basis::floors:
        return "step floors";
    case Basis::step_ratios:
        return "steps in step";
    case Basis::runs:
        return "runs";
    case Basis::steps:
        return "steps";
    case Basis::requests:
        return "requests";
    case Basis::exact:
        return "exact";
    case Basis::single:
        return "single";
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

bool runs_are_paired(const std::vector<RecordingStats>& base,
                     const std::vector<RecordingStats>& now) {
    if (base.size() != now.size() || base.size() < 2) {
        return false;
    }
    for (std::size_t i = 0; i < base.size(); ++i) {
        const auto name = [](const RecordingStats& s) {
            return std::filesystem::path(s.path).filename();
        };
        if (name(base[i]) != name(now[i])) {
            return false;
        }
    }
    return true;
}

std::vector<MetricComparison> compare_runs(const std::vector<RecordingStats>& base,
                                           const std::vector<RecordingStats>& now,
                                           const CompareOptions& options) {
    if (base.empty() || now.empty()) {
        throw std::invalid_argument("compare needs at least one recording a side");
    }
    // Repetitions on both sides: run-level values. Otherwise one run's
    // samples (pooled, if one side has several).
    const bool by_runs = base.size() >= 2 && now.size() >= 2;
    const bool paired = runs_are_paired(base, now);
    // Rounds kvscope gate recorded in step: the builds took turns, so a
    // request's wall-clock span holds the other build's steps too.
    const auto turns = [](const RecordingStats& s) {
        return s.steps_in_turns;
    };
    const bool in_step =
        std::all_of(base.begin(), base.end(), turns) && std::all_of(now.begin(), now.end(), turns);
    std::vector<MetricComparison> out;

    // A timing or cost: run-level values, or the pooled samples behind them.
    const auto timing = [&](MetricComparison m, double threshold, Basis sample_basis,
                            const auto& samples_of, const auto& run_value) {
        const Values b = run_values(base, run_value);
        const Values n = run_values(now, run_value);
        if (by_runs) {
            if (!b.complete || !n.complete) {
                m.verdict = Verdict::not_comparable;
                m.base_samples = static_cast<std::int64_t>(b.values.size());
                m.new_samples = static_cast<std::int64_t>(n.values.size());
                m.basis = paired ? Basis::rounds : Basis::runs;
                return m;
            }
            return judge_runs(std::move(m), b.values, n.values, paired, threshold, options);
        }
        m.basis = sample_basis;
        return judge_samples(std::move(m), pooled(base, samples_of), pooled(now, samples_of),
                             threshold, options);
    };
    out.push_back(timing(
        metric("step time", "ms", false), options.threshold, Basis::steps,
        [](const RecordingStats& s) -> const std::vector<double>& { return s.step_ms_samples; },
        [](const RecordingStats& s) { return median_of(s.step_ms_samples); }));
    for (const auto& [name, member] :
         {std::pair{"time to first token", &RecordingStats::ttft_ms_samples},
          std::pair{"time per output token", &RecordingStats::tpot_ms_samples}}) {
        const auto samples = member; // clang 14 cannot capture a structured binding
        MetricComparison m = metric(name, "ms", false);
        if (in_step) { // spans that hold the other build's steps: not this build's
            m.basis = paired ? Basis::rounds : by_runs ? Basis::runs : Basis::requests;
            m.verdict = Verdict::not_compared;
            out.push_back(std::move(m));
            continue;
        }
        out.push_back(timing(
            std::move(m), options.threshold, Basis::requests,
            [samples](const RecordingStats& s) -> const std::vector<double>& { return s.*samples; },
            [samples](const RecordingStats& s) { return median_of(s.*samples); }));
    }

    // Costs: recorded by kvscope 0.x onwards (step_counters); hardware
    // counters only where the kernel allowed them.
    const auto all = [](const std::vector<RecordingStats>& runs, auto has) {
        return std::all_of(runs.begin(), runs.end(), has);
    };
    const auto has_costs = [](const RecordingStats& s) {
        return s.costs.steps > 0;
    };
    MetricComparison cpu = metric("engine CPU time", "ms", true);
    const auto cpu_total = [](const RecordingStats& s) {
        return std::optional<double>(s.costs.cpu_ms);
    };
    const auto step_costs = [](const std::vector<RecordingStats>& runs) {
        std::vector<std::vector<double>> costs;
        for (const RecordingStats& s : runs) {
            costs.push_back(s.step_cpu_ms_samples);
        }
        return costs;
    };
    const bool costs = all(base, has_costs) && all(now, has_costs);
    // Steps line up when every run computed the same tokens step by step (the
    // same schedule): only then is one run's step i the other's step i. Two
    // schedules with the same totals but work moved between steps do not.
    const bool steps_line_up = costs && !base.empty() && [&] {
        const std::vector<std::int64_t>& work = base.front().step_tokens;
        const auto same_work = [&](const RecordingStats& s) {
            return s.step_tokens == work;
        };
        return all(base, same_work) && all(now, same_work);
    }();
    std::optional<std::vector<double>> step_ratios;
    std::optional<FloorComparison> floors;
    if (paired && steps_line_up && in_step) { // pairs of rounds, each pair in step
        step_ratios = round_step_ratios(step_costs(base), step_costs(now));
    }
    if (paired && steps_line_up && !step_ratios) {
        floors = compare_step_floors(step_costs(base), step_costs(now), 1 - 2 * options.alpha);
    }
    if (step_ratios) {
        // Steps in step see through the machine's changes of pace, fast or
        // slow; run totals beside them catch a large change confined to a
        // few steps, which moves no median.
        const std::vector<double> base_totals = run_values(base, cpu_total).values;
        const std::vector<double> new_totals = run_values(now, cpu_total).values;
        out.push_back(judge_step_ratios(cpu, *step_ratios, base_totals, new_totals,
                                        options.robust_threshold, options));
        MetricComparison totals = cpu;
        totals.name = "engine CPU time, run totals";
        out.push_back(judge_runs(std::move(totals), base_totals, new_totals, paired,
                                 options.robust_threshold, options));
    } else if (floors) {
        // Floors see through the machine's slow spells; run totals over
        // rounds through a drift of its speed that outlasts a round, which
        // leaves the floors to the few rounds of its fastest stretch.
        out.push_back(judge_floors(cpu, *floors, options.robust_threshold, options));
        MetricComparison totals = cpu;
        totals.name = "engine CPU time, run totals";
        out.push_back(judge_runs(std::move(totals), run_values(base, cpu_total).values,
                                 run_values(now, cpu_total).values, paired,
                                 options.robust_threshold, options));
    } else if (costs && by_runs) {
        out.push_back(judge_runs(std::move(cpu), run_values(base, cpu_total).values,
                                 run_values(now, cpu_total).values, paired,
                                 options.robust_threshold, options));
    } else if (costs) {
        // One run a side: the totals (a run's CPU time, per run), judged
        // with the per-step samples' test.
        const auto samples = [](const RecordingStats& s) -> const std::vector<double>& {
            return s.step_cpu_ms_samples;
        };
        cpu = judge_samples(std::move(cpu), pooled(base, samples), pooled(now, samples),
                            options.robust_threshold, options);
        cpu.basis = Basis::steps;
        const auto mean_total = [&](const std::vector<RecordingStats>& runs) {
            return median(run_values(runs, cpu_total).values);
        };
        cpu.base = mean_total(base);
        cpu.now = mean_total(now);
        cpu.change = cpu.base > 0 ? (cpu.now - cpu.base) / cpu.base : 0;
        const double p_slower = mann_whitney_greater(pooled(base, samples), pooled(now, samples));
        const double p_faster = mann_whitney_greater(pooled(now, samples), pooled(base, samples));
        cpu.verdict =
            cpu.verdict == Verdict::not_comparable ? Verdict::not_comparable
            : cpu.change > options.robust_threshold && p_slower < options.alpha ? Verdict::regressed
            : cpu.change < -options.robust_threshold && p_faster < options.alpha ? Verdict::improved
                                                                                 : Verdict::same;
        cpu.p_value = cpu.verdict == Verdict::regressed  ? p_slower
                      : cpu.verdict == Verdict::improved ? p_faster
                                                         : std::min(p_slower, p_faster);
        out.push_back(cpu);
    } else {
        cpu.verdict = Verdict::not_measured;
        out.push_back(cpu);
    }
    const auto counter = [&](std::string name, bool robust,
                             std::int64_t RecordingStats::StepCosts::*field) {
        MetricComparison m = metric(std::move(name), "", robust);
        const auto counted = [field](const RecordingStats& s) {
            return s.costs.*field >= 0;
        };
        if (!all(base, counted) || !all(now, counted)) {
            m.verdict = Verdict::not_measured;
            return m;
        }
        const auto value = [field](const RecordingStats& s) {
            return std::optional<double>(static_cast<double>(s.costs.*field));
        };
        // Cycles follow what a neighbour does to shared caches: the
        // wall-clock threshold.
        const double threshold = robust ? options.robust_threshold : options.threshold;
        if (by_runs) {
            return judge_runs(std::move(m), run_values(base, value).values,
                              run_values(now, value).values, paired, threshold, options);
        }
        // One number a side: instructions, barely noisy, are judged by the
        // threshold alone; cycles, without a test, only shown.
        m.base = static_cast<double>(base.front().costs.*field);
        m.now = static_cast<double>(now.front().costs.*field);
        m.change = m.base > 0 ? (m.now - m.base) / m.base : 0;
        if (!robust) {
            return m;
        }
        m.verdict = m.change > threshold    ? Verdict::regressed
                    : m.change < -threshold ? Verdict::improved
                                            : Verdict::same;
        return m;
    };
    out.push_back(counter("instructions", true, &RecordingStats::StepCosts::instructions));
    // Cycles follow the caches a neighbour shares: not noise-robust.
    out.push_back(counter("cycles", false, &RecordingStats::StepCosts::cycles));

    MetricComparison hits = metric("prefix hit rate", "%", true);
    std::vector<double> base_rates;
    std::vector<double> new_rates;
    for (const RecordingStats& s : base) {
        base_rates.push_back(s.prefix_hit_rate);
    }
    for (const RecordingStats& s : now) {
        new_rates.push_back(s.prefix_hit_rate);
    }
    const double base_rate = median(base_rates);
    const double new_rate = median(new_rates);
    hits.base = 100 * base_rate;
    hits.now = 100 * new_rate;
    hits.change = base_rate > 0 ? (new_rate - base_rate) / base_rate : 0;
    if (base_rate - new_rate > options.hit_rate_drop) {
        hits.verdict = Verdict::regressed;
    } else if (new_rate - base_rate > options.hit_rate_drop) {
        hits.verdict = Verdict::improved;
    }
    out.push_back(hits);

    out.push_back(exact("computed tokens", "", base, now,
                        [](const RecordingStats& s) { return s.computed_tokens(); }));
    out.push_back(exact("generated tokens", "", base, now,
                        [](const RecordingStats& s) { return s.generated_tokens; }));
    out.push_back(exact("prefix hit tokens", "", base, now,
                        [](const RecordingStats& s) { return s.prefix_hit_tokens; }));
    out.push_back(exact("KV bytes written", "B", base, now,
                        [](const RecordingStats& s) { return s.kv_bytes_written(); }));
    if (all(base, has_costs) && all(now, has_costs)) {
        out.push_back(exact("KV bytes read", "B", base, now,
                            [](const RecordingStats& s) { return s.kv_bytes_read(); }));
    } else {
        MetricComparison read = metric("KV bytes read", "B", true);
        read.basis = Basis::exact;
        read.verdict = Verdict::not_measured;
        out.push_back(read);
    }
    out.push_back(
        exact("preemptions", "", base, now, [](const RecordingStats& s) { return s.preemptions; }));
    out.push_back(exact("peak used blocks", "", base, now,
                        [](const RecordingStats& s) { return s.peak_used_blocks; }));
    return out;
}

std::vector<MetricComparison> compare_stats(const RecordingStats& base, const RecordingStats& now,
                                            const CompareOptions& options) {
    return compare_runs({base}, {now}, options);
}

MetricCells format_metric(const MetricComparison& m) {
    // snprintf rather than streams: the conversions `kvscope compare` always
    // printed, so tables in CI logs stay comparable across versions.
    char buffer[96];
    MetricCells cells;
    cells.metric = m.name;
    cells.unit = m.unit;
    const bool whole = m.unit.empty() || m.unit == "B"; // counts and bytes
    const bool measured = m.verdict != Verdict::not_measured && m.verdict != Verdict::not_compared;
    std::snprintf(buffer, sizeof buffer, whole ? "%.0f" : "%.3f", m.base);
    cells.base = measured ? buffer : "-";
    std::snprintf(buffer, sizeof buffer, whole ? "%.0f" : "%.3f", m.now);
    cells.now = measured ? buffer : "-";
    std::snprintf(buffer, sizeof buffer, "%+.1f%%", 100 * m.change);
    cells.change = measured ? buffer : "-";
    cells.interval = "-";
    if (m.high > 0) {
        if (std::isfinite(m.high) && m.low > 0) {
            std::snprintf(buffer, sizeof buffer, "%.3f-%.3fx", m.low, m.high);
            cells.interval = buffer;
        } else {
            cells.interval = "unbounded";
        }
    }
    cells.p_value = "-";
    if (m.p_value >= 0) {
        std::snprintf(buffer, sizeof buffer, "%.2g", m.p_value);
        cells.p_value = buffer;
    }
    cells.samples = "-";
    if (m.base_samples > 0 || m.new_samples > 0) {
        if (m.basis == Basis::rounds || m.basis == Basis::floors || m.basis == Basis::step_ratios) {
            std::snprintf(buffer, sizeof buffer, "%lld rounds",
                          static_cast<long long>(m.base_samples));
        } else {
            std::snprintf(
                buffer, sizeof buffer, m.basis == Basis::runs ? "%lld/%lld runs" : "%lld/%lld",
                static_cast<long long>(m.base_samples), static_cast<long long>(m.new_samples));
        }
        cells.samples = buffer;
    }
    cells.robust = m.basis == Basis::exact ? "exact" : m.noise_robust ? "yes" : "no";
    cells.verdict = verdict_name(m.verdict);
    return cells;
}

int count_regressions(const std::vector<MetricComparison>& rows) {
    return static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const MetricComparison& m) {
        return m.verdict == Verdict::regressed;
    }));
}

std::string compare_criteria(const CompareOptions& options, std::size_t runs_a_side) {
    char text[2048];
    if (runs_a_side >= 2) {
        std::snprintf(
            text, sizeof text,
            "Repetitions: each run is one sample (a round's two runs a pair when the files "
            "match by name, as kvscope gate writes them). A timing's change is the "
            "Hodges-Lehmann ratio of run-level values (medians; CPU time and counters: totals) "
            "with its exact %.0f%% rank interval; it regresses when more than %.0f%% slower "
            "(wall clock) or %.0f%% (noise-robust: CPU time, instructions) with p < %.3g "
            "(one-sided signed-rank test over rounds, Mann-Whitney over unpaired runs). Over "
            "rounds whose steps line up, the engine CPU time is also each side's per-step "
            "floor (step floors: every step's least CPU time over the side's runs, summed), "
            "which the machine's slow spells leave alone; its test swaps rounds' runs (a "
            "randomisation test) and its interval inverts that test. Rounds that kvscope gate "
            "recorded in step (the builds taking steps in turns) are judged instead on each "
            "round's median step ratio (steps in step), as paired values (its base and new "
            "columns are the median run totals); their time to first token and time per "
            "output token span the other build's steps too and are not compared. The prefix "
            "hit rate regresses when it drops by more than %.0f points. Work figures must be equal "
            "('differs' fails nothing but means the runs did not do the same work).",
            100 * (1 - 2 * options.alpha), 100 * options.threshold, 100 * options.robust_threshold,
            options.alpha, 100 * options.hit_rate_drop);
    } else {
        std::snprintf(
            text, sizeof text,
            "One run a side: timings (medians) regress when more than %.0f%% slower (wall clock) "
            "or %.0f%% (noise-robust: CPU time, instructions) with p < %.3g (one-sided "
            "Mann-Whitney U over steps or requests, which a machine busier during one whole run "
            "fools: record repetitions, or use kvscope gate, for a verdict that holds on a shared "
            "machine); the prefix hit rate when it drops by more than %.0f points. Work figures "
            "must be equal ('differs' fails nothing but means the runs did not do the same "
            "work). Runs kvscope gate recorded in step have their request spans left out: they "
            "hold the other build's steps too.",
            100 * options.threshold, 100 * options.robust_threshold, options.alpha,
            100 * options.hit_rate_drop);
    }
    return text;
}

} // namespace kvscope::profiler
