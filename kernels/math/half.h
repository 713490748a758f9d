// IEEE half (fp16) and bfloat16 conversions, exact for every input including
// subnormals, infinities and NaN. Host and device code share them (the CPU KV
// codec and the CUDA kernels round the same way).
#pragma once

#include "kernels/math/host_device.h"

#include <cstdint>
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace kvscope {

KVSCOPE_HD inline float fp16_to_fp32(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
    // A finite half converts exactly in one instruction on the device (the
    // quantised KV formats' scales, once a group); infinities and NaNs take
    // the code below, whose NaN payloads are the host's.
    if ((h & 0x7c00u) != 0x7c00u) {
        return __half2float(__ushort_as_half(h));
    }
#endif
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu;
    std::uint32_t mantissa = h & 0x3ffu;
    std::uint32_t bits;
    if (exponent == 0x1f) { // inf / NaN
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) { // normal
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa == 0) { // signed zero
        bits = sign;
    } else { // subnormal: normalise
        std::uint32_t e = 113;
        while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            --e;
        }
        bits = sign | (e << 23) | ((mantissa & 0x3ffu) << 13);
    }
    return math::bits_to_float(bits);
}

// Round to nearest even, as hardware conversions do.
KVSCOPE_HD inline std::uint16_t fp32_to_fp16(float value) {
    const std::uint32_t bits = math::float_to_bits(value);
    const std::uint32_t sign = (bits >> 16) & 0x8000u;
    const std::uint32_t abs = bits & 0x7fffffffu;
    if (abs >= 0x7f800000u) { // inf or NaN (keep NaN quiet)
        return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    }
    if (abs >= 0x477ff000u) { // rounds to >= 65520: overflow to inf
        return static_cast<std::uint16_t>(sign | 0x7c00u);
    }
    if (abs < 0x38800000u) { // below the smallest normal half: subnormal or zero
        const float magic = math::bits_to_float(0x3f000000u); // 0.5: aligns to 2^-24 ulps
        const float rounded = math::bits_to_float(abs) + magic;
        return static_cast<std::uint16_t>(
            sign | (math::float_to_bits(rounded) - math::float_to_bits(magic)));
    }
    const std::uint32_t odd = (abs >> 13) & 1u;
    const std::uint32_t rounded = abs + 0xc8000fffu + odd; // rebias exponent and round
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

KVSCOPE_HD inline float bf16_to_fp32(std::uint16_t b) {
    return math::bits_to_float(static_cast<std::uint32_t>(b) << 16);
}

KVSCOPE_HD inline std::uint16_t fp32_to_bf16(float value) {
    const std::uint32_t bits = math::float_to_bits(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return static_cast<std::uint16_t>((bits >> 16) | 0x40u); // quiet NaN
    }
    return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

} // namespace kvscope
