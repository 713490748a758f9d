#include "engine/util/nvtx_range.h"

#include <array>
#include <string>

namespace kvscope::nvtx {

const char* layer_name(int layer) {
    constexpr int kNamed = 512;
    static const std::array<std::string, kNamed> names = [] {
        std::array<std::string, kNamed> all;
        for (int i = 0; i < kNamed; ++i) {
            all[static_cast<std::size_t>(i)] = "layer " + std::to_string(i);
        }
        return all;
    }();
    if (layer < 0 || layer >= kNamed) {
        return "layer";
    }
    return names[static_cast<std::size_t>(layer)].c_str();
}

} // namespace kvscope::nvtx
