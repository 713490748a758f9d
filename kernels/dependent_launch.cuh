// Kernel launches that may overlap the kernel before them in the stream
// (programmatic dependent launch; see launch_overlap.h for when and why).
//
// The contract, on the device: a kernel launched through launch_kernel calls
// wait_for_previous_kernel() before it reads anything an earlier kernel of
// the stream wrote (activations, the step's tables) and before it writes
// anything an earlier kernel may still read. Before that call it may only
// read what no kernel of the step writes: the weights. The wait returns once
// the previous kernel has finished and its writes are visible; that kernel
// itself waited for the one before it, so every earlier kernel is done too.
// Right after the wait the kernel lets the next one start launching, so at
// most two kernels of the chain are resident at once. Loads after the wait
// see the earlier kernels' writes whatever path they take (__ldg included):
// the wait makes them visible to this grid. The wait is a compiler barrier
// for memory (asm volatile with a memory clobber), so no load of an
// activation is hoisted above it.
#pragma once

#include "kernels/cuda_check.cuh"
#include "kernels/launch_overlap.h"

#include <cuda_runtime.h>
#include <string>
#include <utility>

namespace kvscope::kernels {

__device__ inline void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launches `kernel` as <<<grid, block, shared_bytes, stream>>> would, marked
// as allowed to overlap the previous kernel where launches_overlap() holds
// now. Throws CudaError naming `name` when the launch fails (the launch's own
// status: no cudaGetLastError after it, as a <<<>>> launch needs).
template <typename... Params, typename... Args>
void launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                   std::size_t shared_bytes, cudaStream_t stream, Args&&... args) {
    cudaLaunchAttribute overlap{};
    overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = &overlap;
    config.numAttrs = launches_overlap() ? 1 : 0;
    const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
    if (launched != cudaSuccess) {
        (void)cudaGetLastError(); // the error is reported here, not at the next check
        throw CudaError(launched, std::string("launch of ") + name +
                                      " failed: " + cudaGetErrorName(launched) + " (" +
                                      cudaGetErrorString(launched) + ")");
    }
}

} // namespace kvscope::kernels
