#include "profiler/recording/machine_info.h"

#include "engine/gpu_devices.h"

#include <fstream>
#include <sys/utsname.h>
#include <thread>
#include <unistd.h>

namespace kvscope::profiler {
namespace {

// The value after "key<spaces>:" on the first line of `file` starting with key.
std::string proc_field(const char* file, const std::string& key) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(key, 0) == 0) {
            const auto colon = line.find(':');
            if (colon == std::string::npos) {
                continue;
            }
            const auto start = line.find_first_not_of(" \t", colon + 1);
            return start == std::string::npos ? std::string() : line.substr(start);
        }
    }
    return {};
}

} // namespace

std::map<std::string, std::string> machine_info() {
    std::map<std::string, std::string> info;
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) {
        info["machine_host"] = host;
    }
    utsname names{};
    if (uname(&names) == 0) {
        info["machine_os"] = std::string(names.sysname) + " " + names.release + " " + names.machine;
    }
    const std::string cpu = proc_field("/proc/cpuinfo", "model name");
    info["machine_cpu"] = cpu.empty() ? "unknown" : cpu;
    info["machine_cpu_threads"] = std::to_string(std::thread::hardware_concurrency());
    const std::string memory = proc_field("/proc/meminfo", "MemTotal"); // "24576000 kB"
    if (!memory.empty()) {
        info["machine_memory_bytes"] = std::to_string(std::stoll(memory) * 1024);
    }
    const GpuInventory gpus = query_gpu_devices();
    std::string names_of_gpus;
    for (const GpuDevice& d : gpus.devices) {
        names_of_gpus += (names_of_gpus.empty() ? "" : ", ") + d.name;
    }
    info["machine_gpus"] = names_of_gpus.empty() ? "none" : names_of_gpus;
    return info;
}

} // namespace kvscope::profiler
