// How many threads the whole machine has ready to run right now, beside how
// many CPUs it has online: the cheap sign (a few microseconds to read) that
// other processes want the cores too, which a thread pool can check without
// waking its own threads to find out.
#pragma once

namespace kvscope {

// Threads running or waiting for a CPU, every process's, the caller
// included (the kernel's nr_running, from /proc/loadavg's fourth field);
// -1 where it cannot be read (not Linux, no /proc).
int machine_runnable_threads() noexcept;

// CPUs online in the machine: the CPUs machine_runnable_threads() counts
// threads across.
int machine_online_cpus() noexcept;

} // namespace kvscope
