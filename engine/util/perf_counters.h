// Hardware counters of the calling thread (instructions retired, CPU cycles)
// through Linux's perf_event_open, counting user-space work only. Where the
// kernel does not allow it (no PMU under a hypervisor, perf_event_paranoid too
// strict, a seccomp filter) the counters say why instead, so a recording can
// state "not counted: <reason>" rather than hold zeros.
#pragma once

#include <cstdint>
#include <string>

namespace kvscope {

struct CounterReading {
    std::int64_t instructions = -1; // -1: not counted
    std::int64_t cycles = -1;
};

class ThreadPerfCounters {
public:
    // Opens the counters on the calling thread; they count only that thread.
    ThreadPerfCounters();
    ~ThreadPerfCounters();
    ThreadPerfCounters(const ThreadPerfCounters&) = delete;
    ThreadPerfCounters& operator=(const ThreadPerfCounters&) = delete;

    bool available() const { return leader_ >= 0; }
    // Why the counters are not available ("" when they are).
    const std::string& unavailable_reason() const { return reason_; }

    // Totals since opening; -1s when unavailable, and once the kernel has
    // multiplexed them (shared the PMU: totals would be estimates).
    CounterReading read() const;

private:
    int leader_ = -1; // instructions
    int cycles_ = -1;
    std::string reason_;
};

// Whether this process could count its threads' hardware events, and if not
// why (opens and closes a counter): what `kvscope info` and recordings say.
std::string perf_counters_unavailable_reason();

} // namespace kvscope
