// The FFN gate activations, shared by the CPU ops and the CUDA kernels so
// both compute the same values.
#pragma once

#include "kernels/math/host_device.h"

#include <cmath>
#include <math.h> // tanhf, expf: the names both compilers know in device code

namespace kvscope::math {

// GELU with the tanh approximation (PyTorch's approximate="tanh", which
// Gemma's gelu_pytorch_tanh names).
KVSCOPE_HD inline float gelu_tanh(float x) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    constexpr float kCubic = 0.044715f;
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)));
}

KVSCOPE_HD inline float silu(float x) {
    return x / (1.0f + expf(-x));
}

} // namespace kvscope::math
