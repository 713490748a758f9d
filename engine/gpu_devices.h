// Which CUDA GPUs this process can use. Works in every build: without CUDA
// support compiled in, it says so instead of listing devices.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kvscope {

struct GpuDevice {
    int index = 0;
    std::string name;
    int compute_major = 0;
    int compute_minor = 0;
    std::size_t total_memory_bytes = 0;
    int multiprocessors = 0;
};

struct GpuInventory {
    std::vector<GpuDevice> devices;
    // Why `devices` is empty: not compiled in, no driver, no device, ...
    std::string unavailable_reason;
};

GpuInventory query_gpu_devices();

} // namespace kvscope
