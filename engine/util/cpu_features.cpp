#include "engine/util/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace kvscope {
namespace {

CpuFeatures detect() {
    CpuFeatures features;
#if defined(__x86_64__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) {
        return features;
    }
    const bool osxsave = (ecx & bit_OSXSAVE) != 0;
    // The OS must save XMM and YMM state on context switches (XCR0 bits 1, 2)
    // or AVX instructions fault.
    // AVX-512 needs the opmask and both halves of the ZMM registers saved
    // too (bits 5, 6, 7).
    bool ymm_saved = false;
    bool zmm_saved = false;
    if (osxsave) {
        unsigned xcr0_low = 0, xcr0_high = 0;
        __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
        ymm_saved = (xcr0_low & 0x6u) == 0x6u;
        zmm_saved = ymm_saved && (xcr0_low & 0xe0u) == 0xe0u;
    }
    features.avx = ymm_saved && (ecx & bit_AVX) != 0;
    features.fma = features.avx && (ecx & bit_FMA) != 0;
    features.f16c = features.avx && (ecx & bit_F16C) != 0;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0) {
        features.avx2 = features.avx && (ebx & bit_AVX2) != 0;
        features.avx512_vnni = zmm_saved && (ebx & bit_AVX512F) != 0 && (ebx & bit_AVX512BW) != 0 &&
                               (ebx & bit_AVX512VL) != 0 && (ecx & bit_AVX512VNNI) != 0;
    }
#endif
    return features;
}

} // namespace

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detect();
    return features;
}

} // namespace kvscope
