// fp32 activations to fp16, the input type of the cuBLAS linear layers
// (fp16 inputs, fp32 accumulation and output), saturated at +-65504
// (kernels/half_store.cuh).
#pragma once

#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

void launch_to_half(const float* in, __half* out, std::int64_t count, cudaStream_t stream);

// Rows rows[i] of in (_, width) to out (count, width): the tokens whose
// logits are wanted, gathered before the output head.
void launch_gather_rows(const float* in, const std::int32_t* rows, int count, int width, float* out,
                        cudaStream_t stream);

} // namespace kvscope::kernels
