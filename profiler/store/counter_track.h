// A time series of one quantity, sampled once a step (or, for attached
// engines, at most every few tens of milliseconds).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope::profiler {

struct CounterTrack {
    std::string name;
    std::string unit;
    std::vector<std::int64_t> t_ns;
    std::vector<double> values;
    // The last sample at or before `t_ns`; `fallback` when none.
    double value_at(std::int64_t t_ns, double fallback = 0) const;
    void add(std::int64_t time_ns, double value) {
        t_ns.push_back(time_ns);
        values.push_back(value);
    }
};

} // namespace kvscope::profiler
