#include "profiler/gate/step_floors.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>

namespace kvscope::profiler {
namespace {

using Runs = std::vector<std::vector<double>>;

constexpr std::size_t kMaxStretches = 64;
constexpr std::size_t kExactRounds = 12;
constexpr std::size_t kSampledRelabellings = 4095; // besides the observed labelling
// A fixed seed: the same relabellings on every read of the same files.
// mt19937_64's output is fixed by the standard, so on every platform too.
constexpr std::uint64_t kSeed = 0x6b7673636f7065;
constexpr int kBisections = 24; // 16 / 2^24: bounds to a millionth of the log ratio

// Each run as up to kMaxStretches sums of consecutive steps: the floor of a
// stretch, not of each of thousands of steps, keeps a long workload's test
// fast, and a spell of slowness covers stretches as it covers steps.
Runs as_stretches(const Runs& runs, std::size_t steps) {
    const std::size_t count = std::min(steps, kMaxStretches);
    Runs out;
    out.reserve(runs.size());
    for (const std::vector<double>& run : runs) {
        std::vector<double> sums(count, 0.0);
        for (std::size_t s = 0; s < steps; ++s) {
            sums[s * count / steps] += run[s];
        }
        out.push_back(std::move(sums));
    }
    return out;
}

// Which rounds each labelling swaps (1: the round's new run counts as base
// and its base run as new). The first is the observed labelling.
std::vector<std::vector<std::uint8_t>> relabellings(std::size_t rounds) {
    std::vector<std::vector<std::uint8_t>> out;
    if (rounds <= kExactRounds) {
        for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << rounds); ++mask) {
            std::vector<std::uint8_t> swap(rounds);
            for (std::size_t r = 0; r < rounds; ++r) {
                swap[r] = static_cast<std::uint8_t>((mask >> r) & 1);
            }
            out.push_back(std::move(swap));
        }
        return out;
    }
    out.emplace_back(rounds, std::uint8_t{0});
    std::mt19937_64 bits(kSeed);
    for (std::size_t i = 0; i < kSampledRelabellings; ++i) {
        std::vector<std::uint8_t> swap(rounds);
        std::uint64_t word = 0;
        for (std::size_t r = 0; r < rounds; ++r) {
            if (r % 64 == 0) {
                word = bits();
            }
            swap[r] = static_cast<std::uint8_t>((word >> (r % 64)) & 1);
        }
        out.push_back(std::move(swap));
    }
    return out;
}

// log(new floor / base floor) under one labelling.
double log_floor_ratio(const Runs& base, const Runs& now, const std::vector<std::uint8_t>& swap,
                       std::vector<double>& base_floor, std::vector<double>& new_floor) {
    std::fill(base_floor.begin(), base_floor.end(), std::numeric_limits<double>::infinity());
    std::fill(new_floor.begin(), new_floor.end(), std::numeric_limits<double>::infinity());
    for (std::size_t r = 0; r < base.size(); ++r) {
        const std::vector<double>& as_base = swap[r] ? now[r] : base[r];
        const std::vector<double>& as_new = swap[r] ? base[r] : now[r];
        for (std::size_t k = 0; k < base_floor.size(); ++k) {
            base_floor[k] = std::min(base_floor[k], as_base[k]);
            new_floor[k] = std::min(new_floor[k], as_new[k]);
        }
    }
    return std::log(std::accumulate(new_floor.begin(), new_floor.end(), 0.0) /
                    std::accumulate(base_floor.begin(), base_floor.end(), 0.0));
}

struct Tails {
    double greater = 1; // share of relabellings whose ratio is at least the observed
    double less = 1;    // ... at most the observed
};

class FloorTest {
public:
    FloorTest(Runs base, Runs now)
        : base_(std::move(base))
        , now_(std::move(now))
        , labellings_(relabellings(base_.size()))
        , base_floor_(base_.front().size())
        , new_floor_(base_.front().size()) {}

    std::size_t relabelling_count() const { return labellings_.size(); }

    // The test of "the new runs cost `ratio` times the base's": the new runs
    // divided by it, then ranked among the relabellings.
    Tails tails(double ratio) {
        Runs scaled = now_;
        for (std::vector<double>& run : scaled) {
            for (double& cost : run) {
                cost /= ratio;
            }
        }
        const double observed =
            log_floor_ratio(base_, scaled, labellings_.front(), base_floor_, new_floor_);
        // Relabellings that move no floor give the observed value itself,
        // up to rounding: they count on both sides.
        const double tolerance = 1e-12 * std::max(1.0, std::abs(observed));
        std::size_t at_least = 0;
        std::size_t at_most = 0;
        for (const std::vector<std::uint8_t>& swap : labellings_) {
            const double t = log_floor_ratio(base_, scaled, swap, base_floor_, new_floor_);
            at_least += t >= observed - tolerance;
            at_most += t <= observed + tolerance;
        }
        const double n = static_cast<double>(labellings_.size());
        return {static_cast<double>(at_least) / n, static_cast<double>(at_most) / n};
    }

    // The least ratio not rejected by the one-sided test that new costs more
    // (`upper` false), or the greatest not rejected by the test that it
    // costs less (`upper` true), at level `alpha`; 0 or infinity when every
    // ratio in reach is kept.
    double bound(double estimate, double alpha, bool upper) {
        const auto kept = [&](double log_ratio) {
            const Tails t = tails(std::exp(log_ratio));
            return (upper ? t.less : t.greater) >= alpha;
        };
        const double centre = std::log(estimate);
        if (!kept(centre)) {
            return estimate; // a lopsided relabelling distribution: the estimate's edge
        }
        // Widen until a ratio is rejected; a side whose every relabelling
        // ties the observed never is.
        double inside = centre;
        double outside = centre;
        bool found = false;
        for (double width = 0.25; width <= 16; width *= 2) {
            outside = upper ? centre + width : centre - width;
            if (!kept(outside)) {
                found = true;
                break;
            }
            inside = outside;
        }
        if (!found) {
            return upper ? std::numeric_limits<double>::infinity() : 0.0;
        }
        for (int i = 0; i < kBisections; ++i) {
            const double middle = 0.5 * (inside + outside);
            (kept(middle) ? inside : outside) = middle;
        }
        return std::exp(inside);
    }

private:
    Runs base_;
    Runs now_;
    std::vector<std::vector<std::uint8_t>> labellings_;
    std::vector<double> base_floor_;
    std::vector<double> new_floor_;
};

bool usable(const Runs& runs, std::size_t steps) {
    return std::all_of(runs.begin(), runs.end(), [steps](const std::vector<double>& run) {
        return run.size() == steps && std::all_of(run.begin(), run.end(), [](double cost) {
                   return cost > 0 && std::isfinite(cost);
               });
    });
}

} // namespace

bool FloorComparison::bounded() const {
    return low > 0 && std::isfinite(high);
}

std::optional<FloorComparison> compare_step_floors(const Runs& base, const Runs& now,
                                                   double confidence) {
    if (base.size() != now.size() || base.size() < 2 || base.front().empty()) {
        return std::nullopt;
    }
    const std::size_t steps = base.front().size();
    if (!usable(base, steps) || !usable(now, steps)) {
        return std::nullopt;
    }
    const Runs base_stretches = as_stretches(base, steps);
    const Runs new_stretches = as_stretches(now, steps);
    FloorTest test(base_stretches, new_stretches);
    FloorComparison out;
    out.rounds = static_cast<std::int64_t>(base.size());
    out.relabellings = static_cast<std::int64_t>(test.relabelling_count());
    out.exact = base.size() <= kExactRounds;
    out.confidence = confidence;
    const auto floor_sum = [](const Runs& runs) {
        double sum = 0;
        for (std::size_t k = 0; k < runs.front().size(); ++k) {
            double least = std::numeric_limits<double>::infinity();
            for (const std::vector<double>& run : runs) {
                least = std::min(least, run[k]);
            }
            sum += least;
        }
        return sum;
    };
    out.base = floor_sum(base_stretches);
    out.now = floor_sum(new_stretches);
    out.ratio = out.now / out.base;
    const Tails at_one = test.tails(1.0);
    out.p_greater = at_one.greater;
    out.p_less = at_one.less;
    const double alpha = (1 - confidence) / 2;
    out.low = test.bound(out.ratio, alpha, false);
    out.high = test.bound(out.ratio, alpha, true);
    return out;
}

} // namespace kvscope::profiler
