#include "kernels/activation_overflow.h"
#include "kernels/attention_scores.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/half_store.cuh"
#include "kernels/nvtx_range.h"
#include "kernels/paged_attention.cuh"
#include "kernels/tile_attention.cuh"
#include "kernels/vector_attention.cuh"

#include <cfloat>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvscope::kernels {

std::size_t AttentionWorkspace::floats(int tokens, int heads, int max_splits, int head_dim) {
    const std::size_t rows = static_cast<std::size_t>(tokens) * heads;
    return rows * max_splits * (static_cast<std::size_t>(head_dim) + 2) + rows * 2;
}

AttentionWorkspace AttentionWorkspace::carve(float* base, int tokens, int heads, int max_splits,
                                             int head_dim, int split) {
    if (split < kShortestAttentionSplit || split > kLongestVectorSplit ||
        split % kShortestAttentionSplit != 0) {
        throw std::invalid_argument("attention split of " + std::to_string(split) +
                                    " entries: a multiple of " +
                                    std::to_string(kShortestAttentionSplit) + " from " +
                                    std::to_string(kShortestAttentionSplit) + " to " +
                                    std::to_string(kLongestVectorSplit) + " is needed");
    }
    const std::size_t rows = static_cast<std::size_t>(tokens) * heads;
    AttentionWorkspace w;
    w.split = split;
    w.partial_out = base;
    w.partial_max = w.partial_out + rows * max_splits * head_dim;
    w.partial_sum = w.partial_max + rows * max_splits;
    w.lse_max = w.partial_sum + rows * max_splits;
    w.lse_sum = w.lse_max + rows;
    return w;
}

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = kAttentionThreads;

// Grid (tokens, kv_heads, splits). One split of one token's context for one
// KV head: unnormalised output, maximum and sum per query head of the group.
__global__ void attention_split_kernel(PagedKvView cache, DeviceBatchView batch,
                                       const float* __restrict__ q, int heads, float scale,
                                       int max_splits, AttentionWorkspace workspace) {
    extern __shared__ float shared[];
    const SplitBlock b = split_block(cache, batch, heads, workspace.split);
    if (b.n == 0) {
        return; // the merge reads only the splits a token's context has
    }
    const int token = b.token;
    const int kv_head = b.kv_head;
    const int split = b.split;
    const int d = cache.head_dim;
    const int group = b.group;
    const int first_head = b.first_head;
    const int begin = b.begin;
    const int n = b.n;
    const std::int32_t* table = b.table;
    float* scores = score_split(b, cache, q, heads, scale, shared);

    // Softmax pieces per query head: a warp per head.
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    for (int g = warp; g < group; g += kWarps) {
        float* s = scores + g * b.length;
        float m = -FLT_MAX;
        for (int j = lane; j < n; j += 32) {
            m = fmaxf(m, s[j]);
        }
        m = warp_max(m);
        float total = 0.0f;
        for (int j = lane; j < n; j += 32) {
            s[j] = expf(s[j] - m);
            total += s[j];
        }
        total = warp_sum(total);
        if (lane == 0) {
            const std::size_t at =
                (static_cast<std::size_t>(token) * heads + first_head + g) * max_splits + split;
            workspace.partial_max[at] = m;
            workspace.partial_sum[at] = total;
        }
    }
    __syncthreads();

    // Weighted values. Each value is decoded once for all the group's query
    // heads (GQA), their sums kept in registers; when head_dim leaves threads
    // over, the entries are dealt to `parts` interleaved shares whose sums
    // meet in shared memory.
    if (group <= kMaxGroupInRegisters) {
        const int lanes = min(d, static_cast<int>(blockDim.x));
        const int parts = static_cast<int>(blockDim.x) / lanes;
        const int part = static_cast<int>(threadIdx.x) / lanes;
        float* sums = scores + group * b.length; // (parts, group, d)
        if (part < parts) {
            for (int i = static_cast<int>(threadIdx.x) % lanes; i < d; i += lanes) {
                float acc[kMaxGroupInRegisters] = {};
                for (int j = part; j < n; j += parts) {
                    const int entry = begin + j;
                    const std::int32_t block = math::block_of_entry(table, entry, cache.block_size);
                    const float value =
                        kv_entry_value(cache, false, block, entry % cache.block_size, kv_head, i);
#pragma unroll
                    for (int g = 0; g < kMaxGroupInRegisters; ++g) {
                        if (g < group) {
                            acc[g] += scores[g * b.length + j] * value;
                        }
                    }
                }
#pragma unroll
                for (int g = 0; g < kMaxGroupInRegisters; ++g) {
                    if (g < group) {
                        sums[(part * group + g) * d + i] = acc[g];
                    }
                }
            }
        }
        __syncthreads();
        for (int o = threadIdx.x; o < group * d; o += blockDim.x) {
            const int g = o / d;
            const int i = o % d;
            float total = 0.0f;
            for (int p = 0; p < parts; ++p) {
                total += sums[(p * group + g) * d + i];
            }
            const std::size_t at =
                (static_cast<std::size_t>(token) * heads + first_head + g) * max_splits + split;
            workspace.partial_out[at * d + i] = total;
        }
        return;
    }
    // Larger groups: a thread per (head of the group, dimension).
    for (int o = threadIdx.x; o < group * d; o += blockDim.x) {
        const int g = o / d;
        const int i = o % d;
        const float* p = scores + g * b.length;
        float acc = 0.0f;
        for (int j = 0; j < n; ++j) {
            const int entry = begin + j;
            const std::int32_t block = math::block_of_entry(table, entry, cache.block_size);
            acc += p[j] * kv_entry_value(cache, false, block, entry % cache.block_size, kv_head, i);
        }
        const std::size_t at =
            (static_cast<std::size_t>(token) * heads + first_head + g) * max_splits + split;
        workspace.partial_out[at * d + i] = acc;
    }
}

constexpr int kMergeThreads = 128;

// One block per (token, query head) row: merges the token's splits, rescaling
// each to the common maximum (as the CPU merges its segments). The threads
// find the maximum and the sum over the splits together; then each thread
// takes W consecutive dimensions of every `groups`-th split, so a block reads
// several splits' outputs at once (a batch-1 decode has few rows and up to a
// hundred splits), and the groups' sums meet in shared memory.
template <int W, typename Out>
__global__ void __launch_bounds__(kMergeThreads)
    attention_merge_kernel(DeviceBatchView batch, int heads, int head_dim, int window,
                           int max_splits, AttentionWorkspace workspace, Out* __restrict__ out,
                           unsigned int* overflows) {
    __shared__ float reduce[kMergeThreads / 32];
    __shared__ float group_sums[kMergeThreads * W];
    wait_for_previous_kernel();
    const std::int64_t row = blockIdx.x;
    const int token = static_cast<int>(row / heads);
    const int splits = math::split_count(batch.cache_positions[token] + 1, window, workspace.split);
    const float* maxes = workspace.partial_max + row * max_splits;
    const float* sums = workspace.partial_sum + row * max_splits;
    const int tid = static_cast<int>(threadIdx.x);
    const int warp = tid / 32;
    const int lane = tid % 32;

    float m = -FLT_MAX;
    for (int s = tid; s < splits; s += kMergeThreads) {
        m = fmaxf(m, maxes[s]);
    }
    m = warp_max(m);
    if (lane == 0) {
        reduce[warp] = m;
    }
    __syncthreads();
    m = reduce[0];
    for (int w = 1; w < kMergeThreads / 32; ++w) {
        m = fmaxf(m, reduce[w]);
    }
    __syncthreads(); // everyone has read reduce before it is reused
    float total = 0.0f;
    for (int s = tid; s < splits; s += kMergeThreads) {
        total += sums[s] * expf(maxes[s] - m);
    }
    total = warp_sum(total);
    if (lane == 0) {
        reduce[warp] = total;
    }
    __syncthreads();
    total = 0.0f;
    for (int w = 0; w < kMergeThreads / 32; ++w) {
        total += reduce[w];
    }

    // head_dim <= kMergeThreads * W (the launcher checks), so every chunk
    // of W dimensions has a thread in group 0.
    const int chunks = head_dim / W;
    const int groups = kMergeThreads / chunks;
    const int group = tid / chunks;
    const int chunk = tid % chunks;
    float acc[W] = {};
    if (group < groups) {
#pragma unroll 4
        for (int s = group; s < splits; s += groups) {
            const float weight = expf(maxes[s] - m);
            const float* part =
                workspace.partial_out + (row * max_splits + s) * head_dim + chunk * W;
            if constexpr (W == 4) {
                const float4 p = *reinterpret_cast<const float4*>(part);
                acc[0] += weight * p.x;
                acc[1] += weight * p.y;
                acc[2] += weight * p.z;
                acc[3] += weight * p.w;
            } else {
#pragma unroll
                for (int k = 0; k < W; ++k) {
                    acc[k] += weight * part[k];
                }
            }
        }
    }
#pragma unroll
    for (int k = 0; k < W; ++k) {
        group_sums[tid * W + k] = acc[k];
    }
    __syncthreads();
    const float inverse = 1.0f / total;
    for (int i = tid; i < head_dim; i += kMergeThreads) {
        const int c = i / W;
        const int k = i % W;
        float value = 0.0f;
        for (int g = 0; g < groups; ++g) {
            value += group_sums[(g * chunks + c) * W + k];
        }
        store_activation(out + row * head_dim + i, value * inverse, overflows);
    }
    if (tid == 0) {
        workspace.lse_max[row] = m;
        workspace.lse_sum[row] = total;
    }
}

} // namespace

// ---- Launcher -----------------------------------------------------------------

bool attention_takes_vector_path(const PagedKvView& cache, int heads) {
    return vector_attention_fits(cache, heads);
}

AttentionSplitLimits attention_split_limits(const PagedKvView& cache, int heads, bool capture) {
    AttentionSplitLimits limits;
    if (!capture && vector_attention_fits(cache, heads)) {
        limits.longest = kLongestVectorSplit;
        limits.shortest = 64;
        limits.blocks_per_multiprocessor = vector_attention_resident_blocks(cache, heads);
    }
    return limits;
}

namespace {

template <typename Out>
void launch_attention(const PagedKvView& cache, const DeviceBatchView& batch, const float* q,
                      int heads, float scale, int max_context, const AttentionWorkspace& workspace,
                      Out* out, cudaStream_t stream) {
    nvtx::Range range("paged_attention");
    if (batch.tokens <= 0 || max_context <= 0) {
        return;
    }
    if (cache.kv_heads <= 0 || heads % cache.kv_heads != 0) {
        throw std::invalid_argument("paged attention: query heads must be a multiple of KV heads");
    }
    const int group = heads / cache.kv_heads;
    const int max_splits =
        (attended_entries(cache, max_context) + workspace.split - 1) / workspace.split;
    if (batch.query_tiles > 0) {
        if (!tile_attention_fits(cache, heads)) {
            throw std::invalid_argument(
                "paged attention: a batch cut into query tiles needs a cache the tile path "
                "takes (see tile_attention_fits)");
        }
        // The tiles, then the untiled tokens beside them on the vector path:
        // the same partial results, merged together below. Alone, in one
        // split, the tiles write the output themselves.
        if (launch_tile_attention(cache, batch, q, heads, scale, max_splits, workspace, out,
                                  stream)) {
            return;
        }
        launch_vector_attention_splits(cache, batch, q, heads, scale, max_splits, workspace,
                                       stream);
    } else if (attention_takes_vector_path(cache, heads)) { // (q must then be 16-byte aligned)
        launch_vector_attention_splits(cache, batch, q, heads, scale, max_splits, workspace,
                                       stream);
    } else {
        if (workspace.split > kAttentionSplit) {
            throw std::invalid_argument(
                "paged attention: splits of " + std::to_string(workspace.split) +
                " entries need the vector path (K and V both f16, bf16, q8_0, q4_0 or fp8, "
                "see vector_attention_fits); at most " +
                std::to_string(kAttentionSplit) + " otherwise");
        }
        const std::size_t shared_bytes =
            split_shared_floats(group, cache.head_dim, workspace.split, /*value_sums=*/true) *
            sizeof(float);
        if (shared_bytes > 48 * 1024) { // above the default: opt in (large groups, MQA)
            KVSCOPE_CUDA_CHECK(cudaFuncSetAttribute(attention_split_kernel,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(shared_bytes)));
        }
        const dim3 grid(static_cast<unsigned>(batch.tokens), static_cast<unsigned>(cache.kv_heads),
                        static_cast<unsigned>(max_splits));
        attention_split_kernel<<<grid, kThreads, shared_bytes, stream>>>(
            cache, batch, q, heads, scale, max_splits, workspace);
        KVSCOPE_CHECK_LAUNCH("attention_split_kernel");
    }
    const std::int64_t rows = static_cast<std::int64_t>(batch.tokens) * heads;
    if (cache.head_dim % 4 == 0 && cache.head_dim <= 4 * kMergeThreads) {
        launch_kernel("attention_merge_kernel", attention_merge_kernel<4, Out>,
                      dim3(static_cast<unsigned>(rows)), dim3(kMergeThreads), 0, stream, batch,
                      heads, cache.head_dim, cache.window, max_splits, workspace, out,
                      activation_overflow_counter());
    } else if (cache.head_dim <= kMergeThreads) {
        launch_kernel("attention_merge_kernel", attention_merge_kernel<1, Out>,
                      dim3(static_cast<unsigned>(rows)), dim3(kMergeThreads), 0, stream, batch,
                      heads, cache.head_dim, cache.window, max_splits, workspace, out,
                      activation_overflow_counter());
    } else {
        throw std::invalid_argument("paged attention: head_dim " + std::to_string(cache.head_dim) +
                                    " is past what the merge takes (a multiple of 4 up to " +
                                    std::to_string(4 * kMergeThreads) + ", or up to " +
                                    std::to_string(kMergeThreads) + ")");
    }
}

} // namespace

void launch_paged_attention(const PagedKvView& cache, const DeviceBatchView& batch, const float* q,
                            int heads, float scale, int max_context,
                            const AttentionWorkspace& workspace, float* out, cudaStream_t stream) {
    launch_attention(cache, batch, q, heads, scale, max_context, workspace, out, stream);
}

void launch_paged_attention_half(const PagedKvView& cache, const DeviceBatchView& batch,
                                 const float* q, int heads, float scale, int max_context,
                                 const AttentionWorkspace& workspace, __half* out,
                                 cudaStream_t stream) {
    launch_attention(cache, batch, q, heads, scale, max_context, workspace, out, stream);
}

} // namespace kvscope::kernels
