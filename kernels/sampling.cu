#include "kernels/cuda_check.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/nvtx_range.h"
#include "kernels/sampling.cuh"

#include <cfloat>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kThreads = 256;

// Scratch layout: sorted logits and ids (rows, vocab) each, ids before the
// sort, segment offsets (rows + 1), then cub's temporary storage.
struct SamplingScratch {
    float* sorted_logits;
    std::int32_t* ids;
    std::int32_t* sorted_ids;
    int* offsets;
    void* sort_storage;
    std::size_t sort_bytes;
};

std::size_t align_up(std::size_t bytes) {
    return (bytes + 255) / 256 * 256;
}

std::size_t sort_storage_bytes(int rows, int vocab) {
    std::size_t bytes = 0;
    // A size query only: cub reads no data when the storage pointer is null.
    KVSCOPE_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
        nullptr, bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
        static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr),
        rows * vocab, rows, static_cast<const int*>(nullptr), static_cast<const int*>(nullptr)));
    return bytes;
}

SamplingScratch carve(void* base, int rows, int vocab) {
    const std::size_t n = static_cast<std::size_t>(rows) * vocab;
    auto* p = static_cast<char*>(base);
    SamplingScratch s{};
    s.sorted_logits = reinterpret_cast<float*>(p);
    p += align_up(n * sizeof(float));
    s.ids = reinterpret_cast<std::int32_t*>(p);
    p += align_up(n * sizeof(std::int32_t));
    s.sorted_ids = reinterpret_cast<std::int32_t*>(p);
    p += align_up(n * sizeof(std::int32_t));
    s.offsets = reinterpret_cast<int*>(p);
    p += align_up((static_cast<std::size_t>(rows) + 1) * sizeof(int));
    s.sort_storage = p;
    s.sort_bytes = sort_storage_bytes(rows, vocab);
    return s;
}

// Greedy: the largest logit, the lowest id among equals (as the CPU sampler).
// A block of 1024 threads per row, reading 16 bytes at a time where the row
// allows: a 49,152-entry row is then 12 loads a thread, not 192 (a 256-thread
// block of 4-byte loads took 38 us a step on an H100, 2026-11-26).
constexpr int kArgmaxThreads = 1024;

template <bool Vector>
__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_kernel(const float* __restrict__ logits, int vocab, std::int32_t* __restrict__ tokens) {
    wait_for_previous_kernel();
    const float* row = logits + static_cast<std::int64_t>(blockIdx.x) * vocab;
    float best = -FLT_MAX;
    int best_id = vocab;
    const auto consider = [&](float value, int id) {
        // Ascending ids within a thread: the first of equals stays. The first
        // value that is no NaN is taken whatever it is, so a row of -inf picks
        // its first id, as the CPU sampler does.
        if (value > best || (best_id == vocab && !isnan(value))) {
            best = value;
            best_id = id;
        }
    };
    if constexpr (Vector) {
        const float4* quads = reinterpret_cast<const float4*>(row);
        for (int i = threadIdx.x; i < vocab / 4; i += blockDim.x) {
            const float4 v = quads[i];
            consider(v.x, 4 * i);
            consider(v.y, 4 * i + 1);
            consider(v.z, 4 * i + 2);
            consider(v.w, 4 * i + 3);
        }
    } else {
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            consider(row[i], i);
        }
    }
    struct Best {
        float value;
        int id;
    };
    using Reduce = cub::BlockReduce<Best, kArgmaxThreads>;
    __shared__ typename Reduce::TempStorage storage;
    const Best winner = Reduce(storage).Reduce(Best{best, best_id}, [](Best a, Best b) {
        return (a.value > b.value || (a.value == b.value && a.id < b.id)) ? a : b;
    });
    if (threadIdx.x == 0) {
        tokens[blockIdx.x] = winner.id < vocab ? winner.id : 0;
    }
}

__global__ void sort_setup_kernel(int rows, int vocab, std::int32_t* __restrict__ ids,
                                  int* __restrict__ offsets) {
    const std::int64_t n = static_cast<std::int64_t>(rows) * vocab;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        ids[i] = static_cast<std::int32_t>(i % vocab);
    }
    if (blockIdx.x == 0) {
        for (int r = threadIdx.x; r <= rows; r += blockDim.x) {
            offsets[r] = r * vocab;
        }
    }
}

using Scan = cub::BlockScan<float, kThreads>;
using SumReduce = cub::BlockReduce<float, kThreads>;

// The first index i < count at which the running sum of value(0..i) reaches
// target, scanning kThreads entries at a time; count - 1 when none does.
template <typename Value>
__device__ int first_reaching(int count, float target, Value value,
                              typename Scan::TempStorage& scan, int* found) {
    if (threadIdx.x == 0) {
        *found = count - 1;
    }
    __syncthreads();
    float running = 0.0f;
    for (int base = 0; base < count; base += kThreads) {
        const int i = base + threadIdx.x;
        const float x = i < count ? value(i) : 0.0f;
        float inclusive;
        float chunk_total;
        Scan(scan).InclusiveSum(x, inclusive, chunk_total);
        if (i < count && running + inclusive >= target) {
            atomicMin(found, i);
        }
        __syncthreads();
        if (*found < count - 1 || running + chunk_total >= target) {
            break; // uniform: every thread read the same *found and sums
        }
        running += chunk_total;
    }
    __syncthreads();
    const int result = *found;
    __syncthreads(); // every thread has read it before the caller reuses `found`
    return result;
}

// The sum of value(i) over i < count, handed to every thread of the block.
template <typename Value>
__device__ float block_sum(int count, Value value, typename SumReduce::TempStorage& reduce,
                           float* shared_total) {
    float partial = 0.0f;
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
        partial += value(i);
    }
    const float total = SumReduce(reduce).Sum(partial);
    if (threadIdx.x == 0) {
        *shared_total = total;
    }
    __syncthreads();
    const float result = *shared_total;
    __syncthreads(); // every thread has read it before the storage is reused
    return result;
}

// The first i in [1, count) where cut(i) holds, else count: the length of
// the prefix to keep when cut holds from some point on (values falling with i).
template <typename Cut>
__device__ int keep_until(int count, Cut cut, int* found) {
    if (threadIdx.x == 0) {
        *found = count;
    }
    __syncthreads();
    for (int i = 1 + threadIdx.x; i < count; i += blockDim.x) {
        if (cut(i)) {
            atomicMin(found, i);
        }
    }
    __syncthreads();
    const int result = *found;
    __syncthreads(); // every thread has read it before `found` is reused
    return result;
}

// One block per row over the row's logits sorted descending (ties: lower id
// first): top-k, then top-p and min-p on the probabilities before the
// temperature, then a draw with the temperature, as the CPU sampler does.
__global__ void filter_and_pick_kernel(const float* __restrict__ sorted_logits,
                                       const std::int32_t* __restrict__ sorted_ids, int vocab,
                                       const DeviceSamplingParams* __restrict__ all_params,
                                       std::int32_t* __restrict__ tokens) {
    __shared__ typename Scan::TempStorage scan;
    __shared__ typename SumReduce::TempStorage reduce;
    __shared__ float shared_total;
    __shared__ int found;
    const float* logits = sorted_logits + static_cast<std::int64_t>(blockIdx.x) * vocab;
    const std::int32_t* ids = sorted_ids + static_cast<std::int64_t>(blockIdx.x) * vocab;
    const DeviceSamplingParams params = all_params[blockIdx.x];
    if (params.temperature <= 0.0f) { // greedy: the first after the stable sort
        if (threadIdx.x == 0) {
            tokens[blockIdx.x] = ids[0];
        }
        return; // uniform over the block: no barrier is split
    }
    const float max_logit = logits[0];
    int keep = params.top_k > 0 && params.top_k < vocab ? params.top_k : vocab;

    const auto prob = [&](int i) {
        return expf(logits[i] - max_logit);
    };
    if (params.top_p < 1.0f) {
        const float total = block_sum(keep, prob, reduce, &shared_total);
        keep = first_reaching(keep, params.top_p * total, prob, scan, &found) + 1;
    }
    if (params.min_p > 0.0f) {
        // Probabilities relative to the first (1) fall with i: keep those >= min_p.
        keep = keep_until(
            keep, [&](int i) { return prob(i) < params.min_p; }, &found);
    }
    const float inverse_temperature = 1.0f / params.temperature;
    const auto weight = [&](int i) {
        return expf((logits[i] - max_logit) * inverse_temperature);
    };
    // Weights fall with i, so those that underflow to 0 form a suffix; drop
    // it. pick_token never returns a candidate of weight 0, but the draw
    // below falls back to its last candidate when u * total (a tree sum)
    // exceeds the scan's running sum by rounding (u within ulps of 1): that
    // must be the least likely candidate of positive weight, not the least
    // likely of the whole vocabulary (low temperatures underflow most of it).
    keep = keep_until(
        keep, [&](int i) { return weight(i) == 0.0f; }, &found);
    const float target = params.uniform * block_sum(keep, weight, reduce, &shared_total);
    // The draw: the first candidate whose cumulative weight passes u * total.
    const int pick = first_reaching(keep, target, weight, scan, &found);
    if (threadIdx.x == 0) {
        tokens[blockIdx.x] = ids[pick];
    }
}

} // namespace

// ---- Launchers ----------------------------------------------------------------

std::size_t sampling_scratch_bytes(int rows, int vocab) {
    const std::size_t n = static_cast<std::size_t>(rows) * vocab;
    return align_up(n * sizeof(float)) + 2 * align_up(n * sizeof(std::int32_t)) +
           align_up((static_cast<std::size_t>(rows) + 1) * sizeof(int)) +
           align_up(sort_storage_bytes(rows, vocab));
}

void launch_sample(const float* logits, int rows, int vocab, const DeviceSamplingParams* params,
                   bool all_greedy, std::int32_t* tokens, void* scratch, cudaStream_t stream) {
    nvtx::Range range("sample");
    if (rows <= 0 || vocab <= 0) {
        return;
    }
    if (all_greedy) {
        const bool vector = vocab % 4 == 0 && reinterpret_cast<std::uintptr_t>(logits) % 16 == 0;
        launch_kernel("argmax_kernel", vector ? argmax_kernel<true> : argmax_kernel<false>,
                      dim3(rows), dim3(kArgmaxThreads), 0, stream, logits, vocab, tokens);
        return;
    }
    SamplingScratch s = carve(scratch, rows, vocab);
    sort_setup_kernel<<<256, kThreads, 0, stream>>>(rows, vocab, s.ids, s.offsets);
    KVSCOPE_CHECK_LAUNCH("sort_setup_kernel");
    // cub's radix sort is stable: equal logits keep ascending ids, the CPU's order.
    KVSCOPE_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
        s.sort_storage, s.sort_bytes, logits, s.sorted_logits, s.ids, s.sorted_ids, rows * vocab,
        rows, s.offsets, s.offsets + 1, 0, static_cast<int>(sizeof(float) * 8), stream));
    filter_and_pick_kernel<<<rows, kThreads, 0, stream>>>(s.sorted_logits, s.sorted_ids, vocab,
                                                          params, tokens);
    KVSCOPE_CHECK_LAUNCH("filter_and_pick_kernel");
}

} // namespace kvscope::kernels
