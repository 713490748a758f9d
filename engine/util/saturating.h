// Integer sums that stop at the type's limits instead of overflowing: for
// readers adding numbers from files kvscope did not write (a damaged
// recording's durations, device or thread ids), where a wrong but bounded
// figure beats undefined behaviour.
#pragma once

#include <cstdint>
#include <limits>

namespace kvscope {

inline std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
    std::int64_t sum = 0;
    if (__builtin_add_overflow(a, b, &sum)) {
        return b > 0 ? std::numeric_limits<std::int64_t>::max()
                     : std::numeric_limits<std::int64_t>::min();
    }
    return sum;
}

} // namespace kvscope
