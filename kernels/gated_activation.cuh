// The gated FFN's activation as every kernel that stores it computes it:
// act(gate) * up into fp16, act SiLU or GELU-tanh (the CPU's:
// math/activation_math.h), saturated and counted (half_store.cuh). The
// separate kernel (swiglu.cu) and the products that end with it (the
// GEMV's and the tile GEMM's gated epilogues) share this one expression,
// so they store the same bits for the same gate and up.
#pragma once

#include "kernels/half_store.cuh"
#include "kernels/math/activation_math.h"

#include <cstddef>
#include <cstdint>
#include <cuda_fp16.h>
#include <type_traits>

namespace kvscope::kernels {

__device__ inline __half gated_activation(bool gelu_tanh, float gate, float up,
                                          unsigned int* overflows) {
    const float activated = gelu_tanh ? math::gelu_tanh(gate) : math::silu(gate);
    return to_half_saturated(activated * up, overflows);
}

// Whether a gated product's output (tokens, ffn) overlaps its input
// (tokens, cols): its blocks read every input row while others store, so
// they must not share memory (the launchers refuse it).
inline bool gated_output_overlaps_input(const __half* out, int ffn, const __half* x, int cols,
                                        int tokens) {
    // As addresses: pointers into different buffers do not compare in C++.
    const auto out_begin = reinterpret_cast<std::uintptr_t>(out);
    const auto x_begin = reinterpret_cast<std::uintptr_t>(x);
    const std::uintptr_t out_end =
        out_begin + sizeof(__half) * static_cast<std::size_t>(tokens) * ffn;
    const std::uintptr_t x_end = x_begin + sizeof(__half) * static_cast<std::size_t>(tokens) * cols;
    return out_begin < x_end && x_begin < out_end;
}

// How a linear layer's kernel ends: storing its sums (fp32, set or added
// to), or, for a gated FFN's gate/up product, storing each gate's
// gated_activation with its up.
enum class Epilogue { store, silu_gate, gelu_gate };

// Calls run(std::integral_constant<Epilogue, E>{}) with the gated epilogue
// for `gelu_tanh`: the one place the flag becomes a template argument.
template <typename Run>
void with_gated_epilogue(bool gelu_tanh, Run&& run) {
    if (gelu_tanh) {
        run(std::integral_constant<Epilogue, Epilogue::gelu_gate>{});
    } else {
        run(std::integral_constant<Epilogue, Epilogue::silu_gate>{});
    }
}

} // namespace kvscope::kernels
