#include "profiler/gate/step_ratios.h"

#include <algorithm>
#include <cmath>

namespace kvscope::profiler {

std::optional<std::vector<double>> round_step_ratios(const std::vector<std::vector<double>>& base,
                                                     const std::vector<std::vector<double>>& now) {
    if (base.size() != now.size() || base.empty()) {
        return std::nullopt;
    }
    const auto usable = [](double x) {
        return x > 0 && std::isfinite(x);
    };
    std::vector<double> ratios;
    for (std::size_t r = 0; r < base.size(); ++r) {
        if (base[r].size() != now[r].size() || base[r].empty()) {
            return std::nullopt;
        }
        // Log ratios: a step twice as slow and one twice as fast are as far
        // from no change. With an odd count the median of the logs is the
        // log of the median ratio; with an even one the mean of the middle
        // two logs, so the geometric mean of the middle two ratios.
        std::vector<double> logs;
        logs.reserve(base[r].size());
        for (std::size_t i = 0; i < base[r].size(); ++i) {
            if (!usable(base[r][i]) || !usable(now[r][i])) {
                return std::nullopt;
            }
            logs.push_back(std::log(now[r][i] / base[r][i]));
        }
        const std::size_t mid = logs.size() / 2;
        std::nth_element(logs.begin(), logs.begin() + static_cast<std::ptrdiff_t>(mid), logs.end());
        double median = logs[mid];
        if (logs.size() % 2 == 0) {
            median = (median + *std::max_element(logs.begin(),
                                                 logs.begin() + static_cast<std::ptrdiff_t>(mid))) /
                     2;
        }
        ratios.push_back(std::exp(median));
    }
    return ratios;
}

} // namespace kvscope::profiler
