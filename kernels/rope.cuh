// Rotary position embedding of Q and K in place, angles from
// kernels/math/rope_math.h (the CPU's).
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

// q: (tokens, heads, head_dim); k: (tokens, kv_heads, head_dim); positions:
// (tokens). divisors: (head_dim / 2) per-pair frequency divisors on the
// device (Llama 3's scaled RoPE), or null. halves: pairs (i, i + head_dim/2)
// rather than (2i, 2i+1) (math::rope_pair_dims).
void launch_rope(float* q, float* k, const std::int32_t* positions, int tokens, int heads,
                 int kv_heads, int head_dim, float theta_base, const float* divisors, bool halves,
                 cudaStream_t stream);

} // namespace kvscope::kernels
