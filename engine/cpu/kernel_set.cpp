#include "engine/cpu/kernel_set.h"

#include "engine/util/cpu_features.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace kvscope::cpu {

KernelSet kernel_set() {
    static const KernelSet chosen = [] {
        const char* asked = std::getenv("KVSCOPE_CPU_KERNELS");
        std::string_view limit = asked != nullptr ? asked : "";
        if (limit == "avx512") {
            limit = ""; // the widest there is, as unset
        } else if (!limit.empty() && limit != "avx2" && limit != "scalar") {
            std::fprintf(stderr,
                         "KVSCOPE_CPU_KERNELS=%s is not avx512, avx2 or scalar: using the widest "
                         "kernels this CPU runs\n",
                         asked);
            limit = "";
        }
#if defined(__x86_64__) // the vector sets are built only there
        if (limit.empty() && cpu_has_avx512_kernels()) {
            return KernelSet::avx512;
        }
        if ((limit.empty() || limit == "avx2") && cpu_has_avx2_kernels()) {
            return KernelSet::avx2;
        }
#endif
        return KernelSet::scalar;
    }();
    return chosen;
}

const char* kernel_set_name(KernelSet set) {
    switch (set) {
    case KernelSet::avx512:
        return "avx512-vnni";
    case KernelSet::avx2:
        return "avx2";
    case KernelSet::scalar:
        break;
    }
    return "scalar";
}

} // namespace kvscope::cpu
