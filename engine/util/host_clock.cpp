#include "engine/util/host_clock.h"

#include <ctime>

namespace kvscope {

HostNanos host_now_ns() noexcept {
    // CLOCK_MONOTONIC rather than std::chrono::steady_clock so the epoch is
    // documented and matches what CUPTI's timestamp callback is set to.
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<HostNanos>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

} // namespace kvscope
