#include "kernels/cuda_check.cuh"
#include "kernels/embedding.cuh"
#include "kernels/nvtx_range.h"

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = 256;

// One block per token; threads stride over the hidden dimension.
__global__ void embedding_gather_kernel(const __half* __restrict__ table,
                                        const std::int32_t* __restrict__ token_ids, int hidden,
                                        int vocab, float scale, float* __restrict__ out) {
    const std::int32_t id = token_ids[blockIdx.x];
    float* row_out = out + static_cast<std::int64_t>(blockIdx.x) * hidden;
    if (id < 0 || id >= vocab) {
        for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
            row_out[i] = 0.0f;
        }
        return;
    }
    const __half* row = table + static_cast<std::int64_t>(id) * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        row_out[i] = __half2float(row[i]) * scale;
    }
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

void launch_embedding_gather(const __half* table, const std::int32_t* token_ids, int tokens,
                             int hidden, int vocab, float* out, cudaStream_t stream, float scale) {
    nvtx::Range range("embedding_gather");
    if (tokens <= 0 || hidden <= 0) {
        return;
    }
    embedding_gather_kernel<<<tokens, kThreads, 0, stream>>>(table, token_ids, hidden, vocab, scale,
                                                             out);
    KVSCOPE_CHECK_LAUNCH("embedding_gather_kernel");
}

} // namespace kvscope::kernels
