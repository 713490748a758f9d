// Which x86-64 vector extensions this CPU and OS let kvscope use, read once
// with cpuid and xgetbv. One place for the question the CPU kernels ask,
// answered the same way by every compiler (clang's __builtin_cpu_supports
// does not know "f16c", GCC's does).
#pragma once

namespace kvscope {

struct CpuFeatures {
    bool avx = false; // and the OS saves the YMM registers
    bool avx2 = false;
    bool fma = false;
    bool f16c = false;
    // AVX-512 F, BW, VL and VNNI, and the OS saves the ZMM registers.
    bool avx512_vnni = false;
};

// False everywhere off x86-64.
const CpuFeatures& cpu_features();

// What the AVX2 kernels need: AVX2, FMA and F16C.
inline bool cpu_has_avx2_kernels() {
    const CpuFeatures& f = cpu_features();
    return f.avx2 && f.fma && f.f16c;
}

// What the AVX-512 kernels need besides the AVX2 ones: AVX-512 with VNNI.
inline bool cpu_has_avx512_kernels() {
    return cpu_has_avx2_kernels() && cpu_features().avx512_vnni;
}

} // namespace kvscope
