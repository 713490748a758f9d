// Rotary position embedding angles, shared by the CPU ops and the CUDA RoPE
// kernel so both rotate by the same cos and sin.
#pragma once

#include "engine/math/host_device.h"

#include <cmath>
#include <math.h> // pow, cos, sin: the names both compilers know in device code

namespace kvscope::math {

// Cos and sin of the angle position * theta^(-2 pair / head_dim), computed in
// double: at 8k positions the angle reaches ~8e3 radians, where fp32 would
// lose the low bits that matter.
struct RopeCosSin {
    float cos;
    float sin;
};

KVSCOPE_HD inline RopeCosSin rope_cos_sin(int position, int pair, int head_dim, float theta_base) {
    const double freq =
        pow(static_cast<double>(theta_base), -2.0 * pair / static_cast<double>(head_dim));
    const double angle = static_cast<double>(position) * freq;
    return {static_cast<float>(cos(angle)), static_cast<float>(sin(angle))};
}

// Rotates the adjacent pair (x[2i], x[2i+1]) of a head, the layout llama.cpp's
// GGUF conversion gives Llama's Q and K.
KVSCOPE_HD inline void rope_rotate_pair(float* pair, RopeCosSin angle) {
    const float a = pair[0];
    const float b = pair[1];
    // Each product rounded before the sum, as on the host: nvcc would fuse one
    // product into a multiply-add and round differently from the CPU.
#if defined(__CUDA_ARCH__)
    pair[0] = __fsub_rn(__fmul_rn(a, angle.cos), __fmul_rn(b, angle.sin));
    pair[1] = __fadd_rn(__fmul_rn(a, angle.sin), __fmul_rn(b, angle.cos));
#else
    pair[0] = a * angle.cos - b * angle.sin;
    pair[1] = a * angle.sin + b * angle.cos;
#endif
}

} // namespace kvscope::math
