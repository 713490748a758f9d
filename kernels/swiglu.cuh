// SwiGLU's gate: gate <- silu(gate) * up, element-wise.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

void launch_silu_mul(float* gate, const float* up, std::int64_t count, cudaStream_t stream);

} // namespace kvscope::kernels
