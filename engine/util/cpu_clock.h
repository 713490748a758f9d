// CPU time, beside the wall clock: what a thread spent running, which another
// process on the same machine changes far less than it changes elapsed time
// (a busy neighbour delays a step but does not make it run more code).
#pragma once

#include <cstdint>

namespace kvscope {

// CPU time the calling thread has run, in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
std::int64_t thread_cpu_ns() noexcept;

// Runs on the CPU until the calling thread has spent `ns` more CPU time: a
// planted slowdown that costs CPU time as slower code would (a sleep costs
// none, so CPU-time gates could not see it).
void spin_thread_cpu_ns(std::int64_t ns) noexcept;

} // namespace kvscope
