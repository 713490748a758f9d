// Launch shape of the element-wise kernels: grid-stride loops over `count`
// values, with the grid capped where one launch covers any count.
#pragma once

#include <cstdint>

namespace kvscope::kernels {

inline unsigned grid_stride_blocks(std::int64_t count, int threads) {
    const std::int64_t blocks = (count + threads - 1) / threads;
    return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

} // namespace kvscope::kernels
