#include "kernels/cuda_check.cuh"
#include "kernels/kv_append.cuh"
#include "kernels/math/kv_codec_math.h"
#include "kernels/math/paged_slots.h"
#include "kernels/nvtx_range.h"

namespace kvscope::kernels {

// ---- Kernels ------------------------------------------------------------------

namespace {

constexpr int kAppendThreads = 64;
constexpr int kFinalizeThreads = 128;

// One block per token; one thread per (plane, KV head) encodes that row with
// the CPU's encoder. A row is only head_dim values, so a thread per row keeps
// the code the CPU tests check and costs little next to attention.
__global__ void kv_append_kernel(PagedKvView cache, const float* __restrict__ k,
                                 const float* __restrict__ v,
                                 const std::int32_t* __restrict__ slot_mapping, bool kivi_only) {
    const int token = blockIdx.x;
    const math::SlotAddress slot = math::slot_address(slot_mapping[token], cache.block_size);
    const int d = cache.head_dim;
    for (int item = threadIdx.x; item < 2 * cache.kv_heads; item += blockDim.x) {
        const bool is_key = item < cache.kv_heads;
        const int head = is_key ? item : item - cache.kv_heads;
        const KvPlaneView& plane = is_key ? cache.keys : cache.values;
        const float* src =
            (is_key ? k : v) + (static_cast<std::int64_t>(token) * cache.kv_heads + head) * d;
        if (kivi_only && !math::quantises_whole_blocks(plane.format)) {
            continue;
        }
        if (math::quantises_whole_blocks(plane.format)) {
            // KIVI: into the block's fp32 open copy; quantised once full.
            const std::int32_t open_slot = cache.open.write_slot[slot.block];
            if (open_slot < 0) {
                continue; // the host assigns a slot to every written block
            }
            float* dst = cache.open_tile(open_slot, is_key, head) +
                         static_cast<std::int64_t>(slot.offset) * d;
            for (int i = 0; i < d; ++i) {
                dst[i] = src[i];
            }
            continue;
        }
        std::uint8_t* row =
            plane.data +
            math::head_block_offset(slot.block, head, cache.kv_heads, plane.head_block_bytes) +
            static_cast<std::int64_t>(slot.offset) * plane.row_bytes;
        math::encode_row(plane.format, src, d, row);
    }
}

// Grid (blocks, kv_heads, 2 planes). KIVI keys: each thread fits one
// channel's scale and minimum, then threads pack the codes byte by byte (a
// byte holds several channels, so each is written by one thread only). KIVI
// values: a thread per token row.
__global__ void kivi_finalize_kernel(PagedKvView cache, const std::int32_t* __restrict__ blocks,
                                     const std::int32_t* __restrict__ device_count) {
    // A graph's grid covers the most blocks a step may fill; this step's
    // count is read here. Uniform over the thread block.
    if (device_count != nullptr && static_cast<int>(blockIdx.x) >= *device_count) {
        return;
    }
    const std::int32_t block = blocks[blockIdx.x];
    const int head = blockIdx.y;
    const bool is_key = blockIdx.z == 0;
    const KvPlaneView& plane = is_key ? cache.keys : cache.values;
    // Uniform over the thread block, so returning here cannot split a barrier.
    if (!math::quantises_whole_blocks(plane.format)) {
        return; // (and write_slot may be null when no plane is KIVI)
    }
    const std::int32_t open_slot = cache.open.write_slot[block];
    if (open_slot < 0) {
        return;
    }
    const int d = cache.head_dim;
    const int bs = cache.block_size;
    const int bits = math::kivi_bits(plane.format);
    const float* tile = cache.open_tile(open_slot, is_key, head);
    std::uint8_t* head_block =
        plane.data + math::head_block_offset(block, head, cache.kv_heads, plane.head_block_bytes);
    if (is_key) {
        for (int c = threadIdx.x; c < d; c += blockDim.x) {
            math::encode_kivi_key_channel(bits, tile, bs, d, c, head_block);
        }
        __syncthreads();
        const int row_code_bytes = d * bits / 8;
        for (int item = threadIdx.x; item < bs * row_code_bytes; item += blockDim.x) {
            math::encode_kivi_key_byte(bits, tile, d, item / row_code_bytes, item % row_code_bytes,
                                       head_block);
        }
        return;
    }
    for (int t = threadIdx.x; t < bs; t += blockDim.x) {
        math::encode_row(plane.format, tile + static_cast<std::int64_t>(t) * d, d,
                         head_block + static_cast<std::int64_t>(t) * plane.row_bytes);
    }
}

} // namespace

// ---- Launchers ----------------------------------------------------------------

void launch_kv_append(const PagedKvView& cache, const float* k, const float* v,
                      const std::int32_t* slot_mapping, int tokens, cudaStream_t stream,
                      bool kivi_only) {
    nvtx::Range range("kv_append");
    if (tokens <= 0) {
        return;
    }
    kv_append_kernel<<<tokens, kAppendThreads, 0, stream>>>(cache, k, v, slot_mapping, kivi_only);
    KVSCOPE_CHECK_LAUNCH("kv_append_kernel");
}

void launch_kivi_finalize(const PagedKvView& cache, const std::int32_t* blocks, int count,
                          cudaStream_t stream, const std::int32_t* device_count) {
    nvtx::Range range("kivi_finalize");
    if (count <= 0 || (!math::quantises_whole_blocks(cache.keys.format) &&
                       !math::quantises_whole_blocks(cache.values.format))) {
        return;
    }
    const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(cache.kv_heads), 2);
    kivi_finalize_kernel<<<grid, kFinalizeThreads, 0, stream>>>(cache, blocks, device_count);
    KVSCOPE_CHECK_LAUNCH("kivi_finalize_kernel");
}

} // namespace kvscope::kernels
