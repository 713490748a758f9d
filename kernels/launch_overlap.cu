#include "kernels/cuda_check.cuh"
#include "kernels/launch_overlap.h"

#include <cuda_runtime_api.h>

namespace kvscope::kernels {
namespace {

thread_local bool overlap_on = false;

} // namespace

bool launches_overlap() {
    return overlap_on;
}

bool device_overlaps_launches(int device) {
    int major = 0;
    KVSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major >= 9;
}

OverlappedLaunches::OverlappedLaunches(bool on)
    : previous_(overlap_on) {
    overlap_on = on;
}

OverlappedLaunches::~OverlappedLaunches() {
    overlap_on = previous_;
}

} // namespace kvscope::kernels
