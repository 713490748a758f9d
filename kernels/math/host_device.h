// What lets one function body run on the CPU and in a CUDA kernel: the
// KVSCOPE_HD qualifier (empty for the host compiler) and bit casts that both
// compilers accept (std::bit_cast is C++20, kernels are compiled as C++17).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KVSCOPE_HD __host__ __device__
#else
#define KVSCOPE_HD
#endif

namespace kvscope::math {

KVSCOPE_HD inline std::uint32_t float_to_bits(float value) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(value);
#else
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
#endif
}

KVSCOPE_HD inline float bits_to_float(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(bits);
#else
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
#endif
}

// a * b + c with the product rounded before the sum, on both compilers. nvcc
// contracts `a * b + c` into one fused multiply-add (rounded once) by default;
// the host codec (built without -mfma) rounds twice. The shared decoders use
// this so the device decodes the very bits the CPU tests check.
KVSCOPE_HD inline float mul_add_unfused(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(__fmul_rn(a, b), c); // intrinsics nvcc never contracts
#else
    return a * b + c;
#endif
}

// std::min/max/clamp are not device functions without relaxed constexpr.
KVSCOPE_HD inline float min_f(float a, float b) {
    return b < a ? b : a;
}
KVSCOPE_HD inline float max_f(float a, float b) {
    return a < b ? b : a;
}
KVSCOPE_HD inline int clamp_i(int x, int lo, int hi) {
    return x < lo ? lo : (x > hi ? hi : x);
}

// Little-endian loads and stores at any alignment: a KV row's scales sit at
// offsets that need not be aligned for their type.
// On the device an aligned address takes one load instead of two or four
// (the same little-endian value): f16 and bf16 rows always are aligned.
KVSCOPE_HD inline std::uint16_t load_u16(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
    if ((reinterpret_cast<std::uintptr_t>(p) & 1u) == 0) {
        return *reinterpret_cast<const std::uint16_t*>(p);
    }
#endif
    return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
KVSCOPE_HD inline void store_u16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v & 0xffu);
    p[1] = static_cast<std::uint8_t>(v >> 8);
}
KVSCOPE_HD inline float load_f32(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
    if ((reinterpret_cast<std::uintptr_t>(p) & 3u) == 0) {
        return *reinterpret_cast<const float*>(p);
    }
#endif
    return bits_to_float(
        static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
        (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24));
}
KVSCOPE_HD inline void store_f32(std::uint8_t* p, float value) {
    const std::uint32_t v = float_to_bits(value);
    p[0] = static_cast<std::uint8_t>(v & 0xffu);
    p[1] = static_cast<std::uint8_t>((v >> 8) & 0xffu);
    p[2] = static_cast<std::uint8_t>((v >> 16) & 0xffu);
    p[3] = static_cast<std::uint8_t>(v >> 24);
}

} // namespace kvscope::math
