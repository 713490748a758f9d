// Copies cache entries between slots in every layer, K and V: the compaction
// after token eviction. All sources are read before any destination is
// written, so copies may overlap.
#pragma once

#include "kernels/paged_kv_view.cuh"

#include <cuda_runtime_api.h>

namespace kvscope::kernels {

// Per-token planes: rows move byte for byte through `staging`, (count,
// kv_heads, keys.row_bytes + values.row_bytes) bytes. KIVI planes are left
// alone (see launch_gather_slots_fp32).
void launch_copy_slot_rows(const PagedKvView& cache, const std::int32_t* from,
                           const std::int32_t* to, int count, std::uint8_t* staging,
                           cudaStream_t stream);

// Any plane: entries decoded to fp32 into keys_out, values_out (count,
// kv_heads, head_dim), for KIVI planes to be appended again at `to` (as the
// CPU store re-quantises them).
void launch_gather_slots_fp32(const PagedKvView& cache, const std::int32_t* from, int count,
                              float* keys_out, float* values_out, cudaStream_t stream);

} // namespace kvscope::kernels
