#include "kernels/attention_capture.cuh"
#include "kernels/attention_scores.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/nvtx_range.cuh"

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
    const int token = blockIdx.x;
    const int kv_head = blockIdx.y;
    const int split = blockIdx.z;
    const int seq = batch.sequence_of[token];
    if (batch.positions[token] < batch.capture_attention_from[seq]) {
        return;
    }
    const int context = batch.cache_positions[token] + 1;
    const int begin = split * kAttentionSplit;
    if (begin >= context) {
        return;
    }
    const int d = cache.head_dim;
    const int group = heads / cache.kv_heads;
    const int first_head = kv_head * group;
    const int n = min(kAttentionSplit, context - begin);
    const std::int32_t* table = batch.block_tables + batch.block_table_offsets[seq];

    float* q_s = shared;
    float* key_s = q_s + group * d;
    float* scores = key_s + kWarps * d;
    load_queries(q, token, heads, first_head, group, d, q_s);
    __syncthreads();
    split_scores(cache, table, kv_head, begin, n, q_s, key_s, scores, group, scale);
    __syncthreads();

    float* dst = sums + batch.capture_offsets[seq] + begin;
    const std::size_t row = static_cast<std::size_t>(token) * heads + first_head;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float probability = 0.0f;
        for (int g = 0; g < group; ++g) {
            probability += expf(scores[g * kAttentionSplit + j] - workspace.lse_max[row + g]) /
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
    NvtxRange range("attention_capture");
    if (batch.tokens <= 0 || max_context <= 0 || batch.capture_attention_from == nullptr) {
        return;
    }
    const int group = heads / cache.kv_heads;
    const int max_splits = (max_context + kAttentionSplit - 1) / kAttentionSplit;
    const std::size_t shared_bytes = split_shared_floats(group, cache.head_dim) * sizeof(float);
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
