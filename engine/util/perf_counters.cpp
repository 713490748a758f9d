#include "engine/util/perf_counters.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kvscope {
namespace {

int open_counter(std::uint64_t config, int group) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = config;
    attr.disabled = group < 0 ? 1 : 0; // the leader starts the group
    // User-space work only: what kvscope's code does, and what a
    // perf_event_paranoid of 2 (the usual default) still lets a process count.
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.read_format =
        PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    return static_cast<int>(syscall(SYS_perf_event_open, &attr, 0 /* this thread */,
                                    -1 /* any CPU */, group, PERF_FLAG_FD_CLOEXEC));
}

std::string paranoid_level() {
    std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
    std::string level;
    in >> level;
    return level.empty() ? "unknown" : level;
}

std::string reason_for(int error) {
    const std::string call = std::string("perf_event_open: ") + std::strerror(error);
    switch (error) {
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
        return "no hardware counters on this machine (a virtual machine whose hypervisor "
               "exposes no PMU, or a CPU the kernel does not know): " +
               call;
    case EACCES:
    case EPERM:
        return "the kernel refuses (kernel.perf_event_paranoid is " + paranoid_level() +
               "; 2 or less lets a process count its own user-space work, or a container's "
               "seccomp profile blocks the call): " +
               call;
    case ENOSYS:
        return "this kernel has no perf events: " + call;
    default:
        return call;
    }
}

} // namespace

ThreadPerfCounters::ThreadPerfCounters() {
    leader_ = open_counter(PERF_COUNT_HW_INSTRUCTIONS, -1);
    if (leader_ < 0) {
        reason_ = reason_for(errno);
        return;
    }
    cycles_ = open_counter(PERF_COUNT_HW_CPU_CYCLES, leader_);
    if (cycles_ < 0) {
        reason_ = reason_for(errno);
        close(leader_);
        leader_ = -1;
        return;
    }
    if (ioctl(leader_, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP) != 0) {
        reason_ = reason_for(errno);
        close(cycles_);
        close(leader_);
        leader_ = cycles_ = -1;
    }
}

ThreadPerfCounters::~ThreadPerfCounters() {
    if (cycles_ >= 0) {
        close(cycles_);
    }
    if (leader_ >= 0) {
        close(leader_);
    }
}

CounterReading ThreadPerfCounters::read() const {
    CounterReading out;
    if (leader_ < 0) {
        return out;
    }
    // PERF_FORMAT_GROUP: count of events, time enabled, time running, values.
    std::uint64_t data[5] = {};
    if (::read(leader_, data, sizeof data) != static_cast<ssize_t>(sizeof data) || data[0] != 2) {
        return out;
    }
    // Counted all the time they were enabled, or not at all: once the kernel
    // has shared the PMU with other users (multiplexed), totals are
    // estimates scaled by a ratio that changes between readings, and a
    // step's difference of two of them could even be negative. Steps then
    // say "not counted" rather than hold a guess.
    const std::uint64_t enabled = data[1];
    const std::uint64_t running = data[2];
    if (running == 0 || running != enabled) {
        return out;
    }
    out.instructions = static_cast<std::int64_t>(data[3]);
    out.cycles = static_cast<std::int64_t>(data[4]);
    return out;
}

std::string perf_counters_unavailable_reason() {
    const ThreadPerfCounters probe;
    return probe.unavailable_reason();
}

} // namespace kvscope
