// How many threads the whole machine has ready to run right now, beside how
// many CPUs it has: the cheap sign (a few microseconds to read) that other
// processes want the cores too, which a thread pool can check without waking
// its own threads to find out.
#pragma once

namespace kvscope {

// Threads running or waiting for a CPU, every process's, the caller
// included (the kernel's nr_running, from /proc/loadavg's fourth field);
// -1 where it cannot be read (not Linux, no /proc) or reads as no thread at
// all (gVisor's fixed file: the caller itself is always running).
int machine_runnable_threads() noexcept;

// The CPUs online in the machine, which machine_runnable_threads() counts
// threads across, where this process may run on every one of them; -1 where
// it may not (a cpuset or an affinity mask: the count then tells of CPUs the
// process does not share, not of the ones it does).
int whole_machine_cpus() noexcept;

} // namespace kvscope
