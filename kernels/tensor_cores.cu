#include "kernels/tensor_cores.h"

#include <atomic>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

bool device_has_mma() {
    constexpr int kDevicesKept = 64;
    static std::atomic<int> known[kDevicesKept] = {}; // 0: not asked yet, 1: yes, 2: no
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        return false;
    }
    if (device >= 0 && device < kDevicesKept && known[device].load() != 0) {
        return known[device].load() == 1;
    }
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
        (void)cudaGetLastError(); // not left for a later check to blame on something else
        return false;             // not kept: a failed question is asked again
    }
    const bool has = major >= 8;
    if (device >= 0 && device < kDevicesKept) {
        known[device].store(has ? 1 : 2);
    }
    return has;
}

} // namespace kvscope::kernels
