// The element-wise and normalisation ops of a Llama-family forward pass on
// the CPU, in fp32. Shapes are given per argument.
#pragma once

#include "engine/model/architecture.h"

#include <cstdint>

namespace kvscope::cpu {

// x, out: (tokens, dim); weight: (dim). out may alias x.
void rms_norm(const float* x, const float* weight, float* out, std::int64_t tokens,
              std::int64_t dim, float eps);

// Rotary position embedding tables for one batch: cos and sin, each
// (tokens, head_dim / 2), computed once and shared by every layer. divisors:
// (head_dim / 2) per-pair frequency divisors (Llama 3's), or null.
void rope_tables(const std::int32_t* positions, std::int64_t tokens, int head_dim, float theta_base,
                 const float* divisors, float* cos_out, float* sin_out);

// Rotates every head's pairs, paired as the architecture pairs them
// (model::RopePairing). x: (tokens, heads, head_dim), rotated in place;
// cos, sin: from rope_tables.
void rope(float* x, const float* cos, const float* sin, std::int64_t tokens, int heads,
          int head_dim, model::RopePairing pairing);

// gate <- act(gate) * up, element-wise over `count` values (SwiGLU, GeGLU).
void gated_activation(float* gate, const float* up, std::int64_t count,
                      model::GateActivation activation);

// x: (tokens, width); each row += bias: (width).
void add_bias(float* x, const float* bias, std::int64_t tokens, std::int64_t width);

// x += y over `count` values (residual connections).
void add_in_place(float* x, const float* y, std::int64_t count);

} // namespace kvscope::cpu
