#include "engine/gpu_devices.h"

#if defined(KVSCOPE_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace kvscope {

GpuInventory query_gpu_devices() {
    GpuInventory inventory;
#if defined(KVSCOPE_HAVE_CUDA)
    int count = 0;
    if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
        // Typical on machines without a GPU: no driver, or no device.
        inventory.unavailable_reason =
            std::string("CUDA reports ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
        cudaGetLastError(); // clear the sticky error so later calls start clean
        return inventory;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
            continue;
        }
        inventory.devices.push_back(
            {i, prop.name, prop.major, prop.minor, prop.totalGlobalMem, prop.multiProcessorCount});
    }
    if (inventory.devices.empty()) {
        inventory.unavailable_reason = "no CUDA device found";
    }
#else
    inventory.unavailable_reason =
        "this build has no CUDA support (configured with KVSCOPE_CUDA=OFF "
        "or without nvcc)";
#endif
    return inventory;
}

} // namespace kvscope
