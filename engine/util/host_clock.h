// The one host clock every kvscope event is stamped with: monotonic integer
// nanoseconds (CLOCK_MONOTONIC on Linux), the clock CUPTI timestamps are
// converted to, so engine events and GPU records line up on one timeline.
#pragma once

#include <cstdint>

namespace kvscope {

using HostNanos = std::int64_t;

// Nanoseconds since an arbitrary fixed point (boot on Linux); never goes back.
HostNanos host_now_ns() noexcept;

} // namespace kvscope
