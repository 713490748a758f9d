// Rotary position embedding of Q and K in place, angles from
// engine/math/rope_math.h (the CPU's).
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

// q: (tokens, heads, head_dim); k: (tokens, kv_heads, head_dim); positions: (tokens).
void launch_rope(float* q, float* k, const std::int32_t* positions, int tokens, int heads,
                 int kv_heads, int head_dim, float theta_base, cudaStream_t stream);

} // namespace kvscope::kernels
