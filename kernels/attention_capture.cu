#include "kernels/attention_capture.cuh"
#include "kernels/attention_scores.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/nvtx_range.h"

#include <stdexcept>

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

// Grid (tokens, kv_heads, splits), as the attention's. Recomputes the split's
// scores (cheaper than keeping every token's scores for the whole step), turns
// them into probabilities with the merged maximum and sum, and adds each
// entry's probability summed over the group's heads into the sequence's sums.
// Atomic adds: several tokens and KV heads score the same entry.
__global__ void attention_capture_kernel(PagedKvView cache, DeviceBatchView batch,
                                         const float* __restrict__ q, int heads, float scale,
                                         AttentionWorkspace workspace, float* __restrict__ sums) {
    extern __shared__ float shared[];
    const SplitBlock b = split_block(cache, batch, heads, workspace.split);
    if (batch.positions[b.token] < batch.capture_attention_from[b.seq] || b.n == 0) {
        return;
    }
    const float* scores = score_split(b, cache, q, heads, scale, shared);
    const int seq = b.seq;
    const int begin = b.begin;
    const int n = b.n;
    const int group = b.group;
    const int first_head = b.first_head;
    const int token = b.token;

    float* dst = sums + batch.capture_offsets[seq] + begin;
    const std::size_t row = static_cast<std::size_t>(token) * heads + first_head;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float probability = 0.0f;
        for (int g = 0; g < group; ++g) {
            probability += expf(scores[g * b.length + j] - workspace.lse_max[row + g]) /
                           workspace.lse_sum[row + g];
        }
        atomicAdd(dst + j, probability);
    }
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

void launch_attention_capture(const PagedKvView& cache, const DeviceBatchView& batch,
                              const float* q, int heads, float scale, int max_context,
                              const AttentionWorkspace& workspace, float* sums,
                              cudaStream_t stream) {
    nvtx::Range range("attention_capture");
    if (batch.tokens <= 0 || max_context <= 0 || batch.capture_attention_from == nullptr) {
        return;
    }
    if (batch.query_tiles > 0) { // it rescores every token's per-token splits
        throw std::invalid_argument("attention capture: a batch cut into query tiles");
    }
    const int group = heads / cache.kv_heads;
    const int max_splits =
        (attended_entries(cache, max_context) + workspace.split - 1) / workspace.split;
    const std::size_t shared_bytes =
        split_shared_floats(group, cache.head_dim, workspace.split, /*value_sums=*/false) *
        sizeof(float);
    if (shared_bytes > 48 * 1024) {
        KVSCOPE_CUDA_CHECK(cudaFuncSetAttribute(attention_capture_kernel,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                static_cast<int>(shared_bytes)));
    }
    const dim3 grid(static_cast<unsigned>(batch.tokens), static_cast<unsigned>(cache.kv_heads),
                    static_cast<unsigned>(max_splits));
    attention_capture_kernel<<<grid, kAttentionThreads, shared_bytes, stream>>>(
        cache, batch, q, heads, scale, workspace, sums);
    KVSCOPE_CHECK_LAUNCH("attention_capture_kernel");
}

} // namespace kvscope::kernels
