// Whether the kernels a thread launches may overlap the kernel before them in
// their stream (programmatic dependent launch, compute capability 9.0 and
// later). A decode step at small batch is a chain of ~300 kernels of 2-5 us,
// each waiting for the one before to finish, drain and be followed by a
// launch; overlapped, a kernel is already resident (its weights loading)
// when the one before ends. Every kernel launched through launch_kernel
// (dependent_launch.cuh) waits for the previous kernel's results before it
// reads or writes activations, so overlap never changes what is computed.
//
// Off unless a scope turns it on: the CUDA backend does for its steps (where
// its options and the device allow); a kernel launched outside that scope (a
// test, a benchmark of one kernel) runs strictly after the one before.
#pragma once

namespace kvscope::kernels {

// Whether this thread's launches overlap now.
bool launches_overlap();

// Whether launches on `device` can overlap: compute capability 9.0 or later,
// and the kernels built for it with their waits (a 9.0 target or later; a
// build for older targets only runs there from PTX without them).
bool device_overlaps_launches(int device);

// Turns overlap on or off for this thread while it lives.
class OverlappedLaunches {
public:
    explicit OverlappedLaunches(bool on);
    ~OverlappedLaunches();
    OverlappedLaunches(const OverlappedLaunches&) = delete;
    OverlappedLaunches& operator=(const OverlappedLaunches&) = delete;

private:
    bool previous_;
};

} // namespace kvscope::kernels
