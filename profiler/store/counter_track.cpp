#include "profiler/store/counter_track.h"

#include <algorithm>

namespace kvscope::profiler {

double CounterTrack::value_at(std::int64_t t, double fallback) const {
    const auto after = std::upper_bound(t_ns.begin(), t_ns.end(), t);
    if (after == t_ns.begin()) {
        return fallback;
    }
    return values[static_cast<std::size_t>(after - t_ns.begin() - 1)];
}

} // namespace kvscope::profiler
