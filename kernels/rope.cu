#include "kernels/cuda_check.cuh"
#include "kernels/math/rope_math.h"
#include "kernels/nvtx_range.h"
#include "kernels/rope.cuh"

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = 128;

// One block per token; each thread takes (head, pair) items of Q then K. The
// angle is the CPU's (math::rope_cos_sin, in double), recomputed per head:
// cheap next to the matrix work, and no table to keep.
__global__ void rope_kernel(float* __restrict__ q, float* __restrict__ k,
                            const std::int32_t* __restrict__ positions, int heads, int kv_heads,
                            int head_dim, float theta_base, const float* __restrict__ divisors,
                            bool halves) {
    const int token = blockIdx.x;
    const int pairs = head_dim / 2;
    const int position = positions[token];
    const int items = (heads + kv_heads) * pairs;
    for (int item = threadIdx.x; item < items; item += blockDim.x) {
        const int head = item / pairs;
        const int pair = item % pairs;
        const math::RopeCosSin angle = math::rope_cos_sin(position, pair, head_dim, theta_base,
                                                          math::rope_divisor(divisors, pair));
        float* x =
            head < heads
                ? q + (static_cast<std::int64_t>(token) * heads + head) * head_dim
                : k + (static_cast<std::int64_t>(token) * kv_heads + (head - heads)) * head_dim;
        const math::RopePairDims dims = math::rope_pair_dims(halves, pair, head_dim);
        math::rope_rotate(x[dims.first], x[dims.second], angle);
    }
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

void launch_rope(float* q, float* k, const std::int32_t* positions, int tokens, int heads,
                 int kv_heads, int head_dim, float theta_base, const float* divisors, bool halves,
                 cudaStream_t stream) {
    nvtx::Range range("rope");
    if (tokens <= 0) {
        return;
    }
    rope_kernel<<<tokens, kThreads, 0, stream>>>(q, k, positions, heads, kv_heads, head_dim,
                                                 theta_base, divisors, halves);
    KVSCOPE_CHECK_LAUNCH("rope_kernel");
}

} // namespace kvscope::kernels
