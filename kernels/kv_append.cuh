// Writes a step's K and V into their slots of the paged pool, encoding them
// in the pool's formats (kernels/math/kv_codec_math.h, the CPU's encoders).
// KIVI planes: rows go to the block's fp32 open copy; launch_kivi_finalize
// then quantises the blocks this step filled.
#pragma once

#include "kernels/paged_kv_view.cuh"

#include <cuda_runtime_api.h>

namespace kvscope::kernels {

// k, v: (tokens, kv_heads, head_dim); slot_mapping: (tokens). kivi_only:
// write the KIVI planes alone (slot copies re-append those; the others'
// bytes were moved as they are).
void launch_kv_append(const PagedKvView& cache, const float* k, const float* v,
                      const std::int32_t* slot_mapping, int tokens, cudaStream_t stream,
                      bool kivi_only = false);

// Quantises each block in `blocks` (count) from its open copy (write_slot),
// K per channel and V per token, in this layer. Only KIVI planes are touched.
// With `device_count` (one int32 on the device), `count` is only the most
// blocks there may be and the kernel reads how many there are: a decode
// graph's step fills none or a few blocks, a different count each replay.
void launch_kivi_finalize(const PagedKvView& cache, const std::int32_t* blocks, int count,
                          cudaStream_t stream, const std::int32_t* device_count = nullptr);

} // namespace kvscope::kernels
