// The element-wise and normalisation ops of a Llama-family forward pass on
// the CPU, in fp32. Shapes are given per argument.
#pragma once

#include <cstdint>

namespace kvscope::cpu {

// x, out: (tokens, dim); weight: (dim). out may alias x.
void rms_norm(const float* x, const float* weight, float* out, std::int64_t tokens,
              std::int64_t dim, float eps);

// Rotary position embedding tables for one batch: cos and sin, each
// (tokens, head_dim / 2), computed once and shared by every layer.
void rope_tables(const std::int32_t* positions, std::int64_t tokens, int head_dim, float theta_base,
                 float* cos_out, float* sin_out);

// Rotates adjacent pairs (x[2i], x[2i+1]) of every head, the layout
// llama.cpp's GGUF conversion gives Llama's Q and K.
// x: (tokens, heads, head_dim), rotated in place; cos, sin: from rope_tables.
void rope_adjacent_pairs(float* x, const float* cos, const float* sin, std::int64_t tokens,
                         int heads, int head_dim);

// gate <- silu(gate) * up, element-wise over `count` values (SwiGLU).
void silu_mul(float* gate, const float* up, std::int64_t count);

// x += y over `count` values (residual connections).
void add_in_place(float* x, const float* y, std::int64_t count);

} // namespace kvscope::cpu
