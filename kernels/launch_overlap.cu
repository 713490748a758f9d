#include "kernels/cuda_check.cuh"
#include "kernels/launch_overlap.h"

#include <cuda_runtime_api.h>

namespace kvscope::kernels {
namespace {

thread_local bool overlap_on = false;

// Built with the same targets as every kernel of this library: the code the
// device runs of it tells whether the kernels' waits were compiled in.
__global__ void overlap_probe_kernel() {}

} // namespace

bool launches_overlap() {
    return overlap_on;
}

bool device_overlaps_launches(int device) {
    int major = 0;
    KVSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 9) {
        return false;
    }
    // A build without a 9.0 target runs here from older PTX, compiled without
    // the kernels' waits (dependent_launch.cuh): overlapping those would race.
    int current = 0;
    KVSCOPE_CUDA_CHECK(cudaGetDevice(&current));
    KVSCOPE_CUDA_CHECK(cudaSetDevice(device));
    cudaFuncAttributes probe{};
    const cudaError_t found = cudaFuncGetAttributes(&probe, overlap_probe_kernel);
    KVSCOPE_CUDA_CHECK(cudaSetDevice(current));
    check_cuda(found, "cudaFuncGetAttributes(overlap_probe_kernel)", __FILE__, __LINE__);
    return probe.ptxVersion >= 90;
}

OverlappedLaunches::OverlappedLaunches(bool on)
    : previous_(overlap_on) {
    overlap_on = on;
}

OverlappedLaunches::~OverlappedLaunches() {
    overlap_on = previous_;
}

} // namespace kvscope::kernels
