#include "engine/util/cpu_clock.h"

#include <ctime>

namespace kvscope {

std::int64_t thread_cpu_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void spin_thread_cpu_ns(std::int64_t ns) noexcept {
    const std::int64_t until = thread_cpu_ns() + ns;
    volatile std::uint64_t sink = 0;
    // Some microseconds of arithmetic between readings of the clock (a system
    // call): the spin is user-space work, as slower code would be, and
    // instructions and cycles grow with it.
    while (thread_cpu_ns() < until) {
        for (int i = 0; i < 8192; ++i) {
            sink = sink * 6364136223846793005ULL + 1;
        }
    }
}

} // namespace kvscope
