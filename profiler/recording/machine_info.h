// What a recording says about the machine it was made on (KVSCOPE_META), so
// a comparison of two recordings can tell when they came from different
// hardware.
#pragma once

#include <map>
#include <string>

namespace kvscope::profiler {

// Keys: machine_host, machine_os, machine_cpu, machine_cpu_threads,
// machine_memory_bytes, machine_gpus ("none" or "NVIDIA H100 80GB HBM3, ...").
std::map<std::string, std::string> machine_info();

} // namespace kvscope::profiler
