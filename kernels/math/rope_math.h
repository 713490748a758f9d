// Rotary position embedding angles, shared by the CPU ops and the CUDA RoPE
// kernel so both rotate by the same cos and sin.
#pragma once

#include "kernels/math/host_device.h"

#include <cmath>
#include <math.h> // pow, cos, sin: the names both compilers know in device code

namespace kvscope::math {

// Cos and sin of the angle position * theta^(-2 pair / head_dim) / divisor,
// computed in double: at 8k positions the angle reaches ~8e3 radians, where
// fp32 would lose the low bits that matter. `divisor` is the pair's entry of
// a Llama 3 model's rope_freqs tensor (its scaled RoPE slows the low
// frequencies down), 1 for other models.
struct RopeCosSin {
    float cos;
    float sin;
};

// No default divisor: a caller that forgot Llama 3's would still compile.
KVSCOPE_HD inline RopeCosSin rope_cos_sin(int position, int pair, int head_dim, float theta_base,
                                          float divisor) {
    const double freq =
        pow(static_cast<double>(theta_base), -2.0 * pair / static_cast<double>(head_dim));
    const double angle = static_cast<double>(position) * freq / static_cast<double>(divisor);
    return {static_cast<float>(cos(angle)), static_cast<float>(sin(angle))};
}

// Pair `pair`'s divisor: divisors[pair], or 1 without them (null).
KVSCOPE_HD inline float rope_divisor(const float* divisors, int pair) {
    return divisors != nullptr ? divisors[pair] : 1.0f;
}

// Rotates one pair of a head's dimensions: (x[2i], x[2i+1]) in the layout
// llama.cpp's GGUF conversion gives Llama's Q and K, (x[i], x[i + d/2]) in
// Qwen's and Gemma's (model::RopePairing).
KVSCOPE_HD inline void rope_rotate(float& first, float& second, RopeCosSin angle) {
    const float a = first;
    const float b = second;
    // Each product rounded before the sum, as on the host: nvcc would fuse one
    // product into a multiply-add and round differently from the CPU.
#if defined(__CUDA_ARCH__)
    first = __fsub_rn(__fmul_rn(a, angle.cos), __fmul_rn(b, angle.sin));
    second = __fadd_rn(__fmul_rn(a, angle.sin), __fmul_rn(b, angle.cos));
#else
    first = a * angle.cos - b * angle.sin;
    second = a * angle.sin + b * angle.cos;
#endif
}

KVSCOPE_HD inline void rope_rotate_pair(float* pair, RopeCosSin angle) {
    rope_rotate(pair[0], pair[1], angle);
}

// The two dimensions of a head that pair `pair` rotates together: (2i, 2i+1)
// (llama.cpp's "NORM", `halves` false) or (i, i + head_dim/2) ("NEOX": Qwen,
// Gemma). The angle is the pair's either way.
struct RopePairDims {
    int first;
    int second;
};

KVSCOPE_HD inline RopePairDims rope_pair_dims(bool halves, int pair, int head_dim) {
    return halves ? RopePairDims{pair, pair + head_dim / 2} : RopePairDims{2 * pair, 2 * pair + 1};
}

} // namespace kvscope::math
