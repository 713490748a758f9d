// Token embedding gather: rows of an fp16 table into fp32 activations.
#pragma once

#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

// table: (vocab, hidden) fp16; token_ids: (tokens); out: (tokens, hidden),
// each value times `scale` (Gemma's sqrt(hidden); 1 for most models).
// Ids outside [0, vocab) give rows of zeros (the host checks ids first).
void launch_embedding_gather(const __half* table, const std::int32_t* token_ids, int tokens,
                             int hidden, int vocab, float* out, cudaStream_t stream,
                             float scale = 1.0f);

} // namespace kvscope::kernels
