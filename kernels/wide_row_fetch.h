// How the vector attention path (vector_attention.cuh) reads 16-bit K and V
// rows: each lane's rows of a tile loaded straight into registers, every load
// issued before any is used (registers, the default, measured on an H100);
// or copied asynchronously (cp.async) through a ring of two tiles per warp
// in shared memory, the next tile landing while the current one is computed
// (ring). Quantised rows always take the ring. A kernel computes the same
// values in the same order either way, so for the same split length its
// output is the same bits; the backend plans split lengths from how many
// blocks of the kernel fit a multiprocessor, which the ring's shared memory
// can change at large batch x context.
//
// A choice per thread, held while a scope lives (as launch_overlap.h's is):
// the CUDA backend sets it for its steps from CudaBackendOptions; tests and
// kvscope-bench-cuda --attention-variants run both.
#pragma once

namespace kvscope::kernels {

enum class WideRowFetch { registers, ring };

// This thread's choice now.
WideRowFetch wide_row_fetch();

// Sets this thread's choice while it lives.
class WideRowFetchScope {
public:
    explicit WideRowFetchScope(WideRowFetch fetch);
    ~WideRowFetchScope();
    WideRowFetchScope(const WideRowFetchScope&) = delete;
    WideRowFetchScope& operator=(const WideRowFetchScope&) = delete;

private:
    WideRowFetch previous_;
};

} // namespace kvscope::kernels
